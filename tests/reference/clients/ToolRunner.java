import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;

import org.apache.kafka.common.utils.internals.Exit;

/**
 * Runs Kafka's command-line tool classes, unchanged, one after another in one JVM: a JVM start costs seconds on
 * a busy machine, a tool run in a warm one a fraction of that (tests/reference/tools_helpers.py, ToolSession).
 *
 * <p>Each line of standard input is one run: the tool's main class and its arguments, tab-separated. The tool's
 * main method runs with System.out and System.err captured; its Exit.exit (how Kafka's tools end) ends the run
 * as the process's end would: the exit code is the first one asked for, and nothing the tool prints after it
 * counts. The run's stdout and stderr go to files {@code <dir>/<n>.out} and {@code <n>.err}, then the line
 * {@code @@done <n> <exit code>} to the real standard output (where the tools' log4j lines go too, unread).
 * An exception out of main is exit code 1 with the trace on stderr, as the JVM prints it.
 */
public class ToolRunner {
    static final class ExitCalled extends Error {
        ExitCalled(int code) {
            super("exit " + code, null, false, false);
        }
    }

    static final class Capture extends OutputStream {
        final ByteArrayOutputStream buf = new ByteArrayOutputStream();
        volatile boolean closed;

        @Override
        public synchronized void write(int b) {
            if (!closed) buf.write(b);
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) {
            if (!closed) buf.write(b, off, len);
        }
    }

    public static void main(String[] argv) throws Exception {
        Path dir = Paths.get(argv[0]);
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        for (int n = 0; (line = in.readLine()) != null; n++) {
            String[] parts = line.split("\t", -1);
            Capture out = new Capture();
            Capture err = new Capture();
            int[] code = {Integer.MIN_VALUE};
            Exit.Procedure stop = (status, message) -> {
                synchronized (code) {
                    if (code[0] == Integer.MIN_VALUE) code[0] = status;
                }
                out.closed = true;
                err.closed = true;
                throw new ExitCalled(status);
            };
            Exit.setExitProcedure(stop);
            Exit.setHaltProcedure(stop);
            PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            System.setOut(toolOut);
            System.setErr(toolErr);
            try {
                Class.forName(parts[0]).getMethod("main", String[].class)
                        .invoke(null, (Object) Arrays.copyOfRange(parts, 1, parts.length));
            } catch (InvocationTargetException e) {
                Throwable cause = e.getCause();
                if (!(cause instanceof ExitCalled)) {
                    toolErr.print("Exception in thread \"main\" ");
                    cause.printStackTrace(toolErr);
                    synchronized (code) {
                        if (code[0] == Integer.MIN_VALUE) code[0] = 1;
                    }
                }
            } finally {
                toolOut.flush();
                toolErr.flush();
                out.closed = true;
                err.closed = true;
                System.setOut(realOut);
                System.setErr(realErr);
            }
            Files.write(dir.resolve(n + ".out"), out.buf.toByteArray());
            Files.write(dir.resolve(n + ".err"), err.buf.toByteArray());
            realOut.println("@@done " + n + " " + (code[0] == Integer.MIN_VALUE ? 0 : code[0]));
            realOut.flush();
        }
        Runtime.getRuntime().halt(0);  // tools may leave non-daemon threads behind
    }
}
