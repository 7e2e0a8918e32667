"""`shoal share-groups` options: the command line read by joptsimple's rules and checked as Kafka 4.4's
ShareGroupCommandOptions checks it, with Kafka's messages (a usage error: the message, then a pointer to
--help, on stderr, exit status 1), the share group state names, and the --help text."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = ["ACTIONS", "HELP", "USAGE_HINT", "Options", "UsageError", "check_args", "parse_args", "parse_states",
           "state_name"]

ACTIONS = ("list", "describe", "delete", "reset-offsets", "delete-offsets")
_WITH_ARG = {"bootstrap-server", "group", "topic", "timeout", "command-config", "to-datetime", "to-offset",
             "from-file"}
_FLAGS = {"list", "describe", "delete", "reset-offsets", "delete-offsets", "all-groups", "all-topics", "dry-run",
          "execute", "export", "to-earliest", "to-latest", "to-current", "members", "offsets", "verbose", "help",
          "version"}
_OPTIONAL_ARG = {"state"}
SCENARIOS = ("to-offset", "to-datetime", "to-earliest", "to-latest", "to-current", "from-file")
SHARE_STATES = ("Dead", "Empty", "Stable")
_OTHER_STATES = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling", "NotReady")
_STATE_NAMES = {s.lower(): s for s in (*SHARE_STATES, *_OTHER_STATES)}  # GroupState's names, by lower case
# joptsimple's availableIf: these options only with one of those actions
_AVAILABLE_IF = (("members", ("describe",)), ("offsets", ("describe",)), ("verbose", ("describe",)),
                 ("state", ("describe", "list")))


class UsageError(Exception):
    """Kafka's printUsageAndExit: the message (then the help) on stderr, exit status 1."""


@dataclass
class Options:
    given: dict[str, list[str | None]] = field(default_factory=dict)

    def has(self, name: str) -> bool:
        return name in self.given

    def value(self, name: str) -> str | None:
        values = self.given.get(name)
        return values[0] if values else None

    def values(self, name: str) -> list[str]:
        return [v for v in self.given.get(name, []) if v is not None]


def _opt(name: str) -> str:
    return f"[{name}]"


def _value_of(argv: list[str], i: int, name: str, eq: str, inline: str) -> tuple[str | None, int]:
    """The value of option ``name`` (argv[i]) and the index of its last word: inline (``--name=value``), the next
    word (required for an option with an argument, taken unless an option for an optional one), or none."""
    if name in _WITH_ARG:
        if eq:
            return inline, i
        if i + 1 < len(argv):
            return argv[i + 1], i + 1
        raise UsageError(f"Option {_opt(name)} requires an argument")
    if name in _OPTIONAL_ARG:
        if eq:
            return inline, i
        if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
            return argv[i + 1], i + 1
        return None, i
    if name in _FLAGS:
        return None, i
    raise UsageError(f"{name} is not a recognized option")


def _check_long(opts: Options, name: str) -> None:
    """joptsimple's conversion of a Long option's argument."""
    if opts.has(name):
        try:
            int(opts.value(name) or "")
        except ValueError:
            raise UsageError(f"Cannot parse argument '{opts.value(name)}' of option {name}") from None


def parse_args(argv: list[str]) -> Options:
    opts = Options()
    i = 0
    while i < len(argv):
        word = argv[i]
        if not word.startswith("--"):
            raise UsageError(f"Found non-option argument '{word}'" if i else f"{word} is not a recognized option")
        name, eq, inline = word[2:].partition("=")
        value, i = _value_of(argv, i, name, eq, inline)
        opts.given.setdefault(name, []).append(value)
        i += 1
    for name, needs in _AVAILABLE_IF:
        if opts.has(name) and not any(opts.has(n) for n in needs):
            raise UsageError(f"Option {_opt(name)} is unavailable in this context")  # joptsimple's availableIf
    _check_long(opts, "timeout")
    _check_long(opts, "to-offset")
    return opts


def _invalid_with(opts: Options, used: str, others: Iterable[str]) -> None:
    """CommandLineUtils.checkInvalidArgs."""
    if opts.has(used):
        for other in others:
            if opts.has(other):
                raise UsageError(f'Option "{_opt(used)}" can\'t be used with option "{_opt(other)}"')


def _check_describe(opts: Options) -> None:
    if not opts.has("group") and not opts.has("all-groups"):
        raise UsageError("Option [describe] takes one of these options: [all-groups], [group]")
    if sum(opts.has(o) for o in ("members", "offsets", "state")) > 1:
        raise UsageError("Option [describe] takes at most one of these options: [members], [offsets], [state]")
    if opts.has("state") and opts.value("state") is not None:
        raise UsageError("Option [describe] does not take a value for [state]")


def _check_delete(opts: Options) -> None:
    if not opts.has("group") and not opts.has("all-groups"):
        raise UsageError("Option [delete] takes the options [group] or [all-groups].")
    if opts.has("all-groups") and opts.has("group"):
        raise UsageError("Option [delete] takes either [group] or [all-groups], not both.")
    if opts.has("all-topics") or opts.has("topic"):
        raise UsageError("Option [delete] does not take the options [topic] or [all-topics].")


def _check_reset(opts: Options) -> None:
    if opts.has("dry-run") and opts.has("execute"):
        raise UsageError("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
    if not opts.has("dry-run") and not opts.has("execute"):
        raise UsageError("Option [reset-offsets] takes the option: [execute] or [dry-run]")
    if not opts.has("group"):
        raise UsageError("Option [reset-offsets] takes the option: [group]")
    scopes = ("topic", "all-topics", "from-file")
    if not any(opts.has(s) for s in scopes):
        raise UsageError("Option [reset-offsets] takes one of these options: [all-topics], [from-file], [topic]")
    for s in scopes:
        _invalid_with(opts, s, [o for o in scopes if o != s])
    if not any(opts.has(s) for s in SCENARIOS):
        raise UsageError("Option [reset-offsets] takes one of these options: " +
                         ", ".join(_opt(s) for s in sorted(SCENARIOS)))
    for s in SCENARIOS:
        _invalid_with(opts, s, [o for o in SCENARIOS if o != s])


def check_args(opts: Options) -> None:
    """ShareGroupCommandOptions.checkArgs of Kafka 4.4, in its order, then the one-action rule."""
    if not opts.has("bootstrap-server"):
        raise UsageError('Missing required argument "[bootstrap-server]"')
    if opts.has("describe"):
        _check_describe(opts)
    if opts.has("delete"):
        _check_delete(opts)
    if opts.has("delete-offsets") and (not opts.has("group") or not opts.has("topic")):
        raise UsageError("Option [delete-offsets] takes the following options: [group], [topic]")
    if opts.has("reset-offsets"):
        _check_reset(opts)
    _invalid_with(opts, "group", ["all-groups"])
    if sum(opts.has(a) for a in ACTIONS) != 1:
        raise UsageError("Command must include exactly one action: --list, --describe, --delete, --reset-offsets, "
                         "--delete-offsets.")


def parse_states(text: str) -> list[str]:
    """groupStatesFromString: comma-separated, case-insensitive; only Dead, Empty, Stable for share groups."""
    parsed = {_STATE_NAMES.get(s.strip().lower(), "Unknown") for s in text.split(",")}
    if not parsed <= set(SHARE_STATES):
        raise UsageError(f"Invalid state list '{text}'. Valid states are: {', '.join(SHARE_STATES)}")
    return sorted(parsed)


def state_name(state: str) -> str:
    """GroupState.parse(...).toString()."""
    return _STATE_NAMES.get(state.lower(), "Unknown")


USAGE_HINT = "Run `shoal share-groups --help` for the options (those of Kafka's kafka-share-groups.sh).\n"

HELP = """shoal share-groups: list, describe and delete share groups (KIP-932), and reset or delete their
offsets (share-partition start offsets). The options are those of Kafka's kafka-share-groups.sh.

Actions (exactly one):
  --list                     the share groups; with --state [STATES], only those in these states
                             (Empty, Stable, Dead, comma-separated)
  --describe                 --group G or --all-groups; shows offsets (the default: start offset and lag
                             per partition), or --members, or --state; --verbose adds detail
  --reset-offsets            --group G (which must have no members), one scope (--topic T[:P,P...],
                             --all-topics, or --from-file CSV), one target (--to-earliest, --to-latest,
                             --to-offset N, --to-datetime YYYY-MM-DDThh:mm:ss.sss, --to-current), and
                             --dry-run or --execute; --export prints the plan as CSV
  --delete                   --group G (repeatable) or --all-groups: delete groups without members
  --delete-offsets           --group G --topic T (repeatable): forget the group's offsets of topics

Common options:
  --bootstrap-server HOSTS   required: where to connect
  --command-config FILE      client properties (security settings)
  --timeout MS               how long to wait for answers (default 30000)
  --help, --version
"""
