#!/work/main/.venv/bin/python
"""Stand-in (issue #19, docs/compatibility.md) for Kafka's bin/kafka-run-class.sh, so that kafka-python's own KafkaFixture starts
shoal: `kafka-run-class.sh kafka.Kafka <kafka.properties>`. JKS stores are converted to PEM
(keytool + openssl), the JAAS file in KAFKA_OPTS becomes listener.name.<l>.<mech>.sasl.jaas.config,
a SCRAM user recorded by the kafka-storage.sh stand-in is created with AlterUserScramCredentials
over an extra PLAINTEXT listener, and Kafka's start-up log line is printed once the port is open."""
import os, re, signal, socket, subprocess, sys, time

props_path = sys.argv[-1]
d = os.path.dirname(props_path)
props = {}
order = []
for line in open(props_path):
    line = line.strip()
    if not line or line.startswith('#') or '=' not in line:
        continue
    k, v = line.split('=', 1)
    props[k.strip()] = v.strip(); order.append(k.strip())

def run(*a):
    subprocess.run(a, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

ks = props.get('ssl.keystore.location', '')
if ks.endswith('.jks'):
    pw = props.pop('ssl.keystore.password', '')
    props.pop('ssl.key.password', None)
    p12 = os.path.join(d, 'server.p12')
    run('keytool', '-importkeystore', '-srckeystore', ks, '-srcstorepass', pw, '-srcalias', 'localhost',
        '-destkeystore', p12, '-deststoretype', 'PKCS12', '-deststorepass', pw, '-destkeypass', pw, '-noprompt')
    key = subprocess.run(['openssl', 'pkcs12', '-in', p12, '-passin', 'pass:' + pw, '-nodes', '-nocerts'],
                         check=True, capture_output=True).stdout.decode()
    leaf = subprocess.run(['openssl', 'pkcs12', '-in', p12, '-passin', 'pass:' + pw, '-nokeys', '-clcerts'],
                          check=True, capture_output=True).stdout.decode()
    cas = subprocess.run(['openssl', 'pkcs12', '-in', p12, '-passin', 'pass:' + pw, '-nokeys', '-cacerts'],
                         check=True, capture_output=True).stdout.decode()
    pem_blocks = lambda s: ''.join(re.findall(r'-----BEGIN [^-]+-----.*?-----END [^-]+-----\n', s, re.S))
    server_pem = os.path.join(d, 'server.pem')
    with open(server_pem, 'w') as f:
        f.write(pem_blocks(key) + pem_blocks(leaf) + pem_blocks(cas))
    props['ssl.keystore.location'] = server_pem
    props['ssl.keystore.type'] = 'PEM'
ts = props.get('ssl.truststore.location', '')
if ts.endswith('.jks'):
    pw = props.pop('ssl.truststore.password', '')
    ca_pem = os.path.join(d, 'truststore.pem')
    run('keytool', '-exportcert', '-rfc', '-keystore', ts, '-storepass', pw, '-alias', 'CARoot', '-file', ca_pem)
    props['ssl.truststore.location'] = ca_pem
    props['ssl.truststore.type'] = 'PEM'

m = re.search(r'-Djava\.security\.auth\.login\.config=(\S+)', os.environ.get('KAFKA_OPTS', ''))
transport = props['inter.broker.listener.name']
if m:
    body = re.search(r'KafkaServer\s*\{(.*?)\};', open(m.group(1)).read(), re.S).group(1).strip()
    mech = props['sasl.enabled.mechanisms'].split(',')[0].strip().lower()
    props[f'listener.name.{transport.lower()}.{mech}.sasl.jaas.config'] = body

scram_file = os.path.join(d, 'scram-user.txt')
admin_port = None
if os.path.exists(scram_file):
    s = socket.socket(); s.bind(('127.0.0.1', 0)); admin_port = s.getsockname()[1]; s.close()
    props['listeners'] += f',SHIMADMIN://127.0.0.1:{admin_port}'
    props['listener.security.protocol.map'] += ',SHIMADMIN:PLAINTEXT'

out = os.path.join(d, 'shoal.properties')
with open(out, 'w') as f:
    for k, v in props.items():
        f.write(f'{k}={v}\n')

child = subprocess.Popen(['/work/main/.venv/bin/shoal', 'serve', out])
signal.signal(signal.SIGTERM, lambda *a: (child.terminate(), child.wait(), sys.exit(0)))
port = int(props['listeners'].split(',')[0].rsplit(':', 1)[1])
for _ in range(600):
    if child.poll() is not None:
        sys.exit(child.returncode)
    try:
        socket.create_connection(('127.0.0.1', port), 0.5).close(); break
    except OSError:
        time.sleep(0.1)
node = props.get('node.id', '0')
print(f'[KafkaRaftServer nodeId={node}] Kafka Server started', flush=True)
if admin_port:
    spec = open(scram_file).read().strip()  # SCRAM-SHA-256=[name=alice,password=alice-secret]
    mm = re.match(r'(SCRAM-SHA-\d+)=\[name=([^,]+),password=([^\]]+)\]', spec)
    from confluent_kafka.admin import AdminClient, UserScramCredentialUpsertion, ScramCredentialInfo, ScramMechanism
    a = AdminClient({'bootstrap.servers': f'127.0.0.1:{admin_port}'})
    mech = ScramMechanism.SCRAM_SHA_256 if mm.group(1).endswith('256') else ScramMechanism.SCRAM_SHA_512
    fut = a.alter_user_scram_credentials([UserScramCredentialUpsertion(mm.group(2), ScramCredentialInfo(mech, 8192), mm.group(3).encode())])
    for f in fut.values():
        f.result()
    print(f'Replayed UserScramCredentialRecord creating new entry for {mm.group(2)}', flush=True)
child.wait()
