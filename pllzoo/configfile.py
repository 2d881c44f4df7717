"""``pllzoo bench --config FILE``: the bench's options from a TOML or YAML file.

The file's keys are the bench's long option names (``methods``, ``dataset``, ``seeds``, ``epochs``,
``batch-size`` or ``batch_size``, ``phi``, ``imb``, ``out``, ...), each with a value of the option's
type; ``methods`` and ``seeds`` may also be lists, and ``hp`` holds the ``--hp`` overrides as a table
(``hp = {"train.lr" = 0.05, "solar:loss.eta" = 0.9}``, nested tables joined with dots) and/or as a
list of ``"key=value"`` strings.  docs/config-example.toml is a complete example.

Precedence, lowest first: the option's own default, the file, the command line (click's
:class:`~click.core.ParameterSource` tells them apart: the file's values are click's ``default_map``).
``--hp`` on the command line adds to the file's ``hp``, a key given in both taking the command line's
value.  A file value goes through the same parsing as the command line's, so ``epochs = 2`` and
``--epochs 2`` (or ``hp = {"train.lr" = 0.05}`` and ``--hp train.lr=0.05``) give the same run id.
A YAML file's numbers are YAML 1.2's (``010`` is ten, ``1e-1`` a number, ``1:30`` text; PyYAML alone reads
YAML 1.1's: octal eight, text, ninety).
Relative paths in the file (``out``, ``data-dir``) are relative to the current folder, as on the
command line.  An unknown key, a value of the wrong type, an unreadable file or a YAML file without
PyYAML is one ``Error:`` line; an ``hp`` key or value refused later, in planning, ends with ``(config file FILE)``
when the file alone gave that key.
"""

from __future__ import annotations

import os
import re
import reprlib
import sys
import warnings
from pathlib import Path
from typing import Any

import click

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (requires-python): the same parser from PyPI (an outside review: every command failed there)
    import tomli as tomllib

from pllzoo.errors import PLLZooError, UnknownNameError, UsageError

META_HP = "pllzoo.config.hp"  # ctx.meta: the file's --hp pairs, before the command line's
META_STDIN = "pllzoo.config.stdin"  # ctx.meta: the text `--config -` read from standard input
META_REPLAY_HP = "pllzoo.replay.hp"  # ctx.meta: a replayed run's typed overrides (pllzoo.replay)
META_FILE_KEYS = "pllzoo.config.hp_keys"  # ctx.meta: (the file, its hp keys the command line did not override)
META_FROM_FILE = "pllzoo.config.from_file"  # ctx.meta: --epochs/--batch-size given by the file, not the command line
NOT_IN_FILE = frozenset({"config", "from_run", "help"})  # options that make no sense inside the file
LIST_OPTIONS = frozenset({"methods", "seeds"})  # comma-separated strings on the command line; lists in a file
MAX_BYTES = 1 << 20  # a config file past 1 MiB is refused (docs/config-example.toml is 2 KB; an outside review's 5 GB
# file, or /dev/zero, was read whole into a MemoryError traceback)
_REPR = reprlib.Repr()
_REPR.maxstring = _REPR.maxother = 80


def _short(value: Any) -> str:
    """``repr(value)`` in at most 80 characters, for messages (an outside review: a YAML alias bomb's value made a
    39 MB "one-line" error)."""
    text = _REPR.repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read(path: Path) -> dict[str, Any]:
    """The top-level table of a ``.toml``, ``.yaml`` or ``.yml`` file; ``-`` reads TOML from standard input.

    :raises PLLZooError: one line: a missing or unreadable file, a syntax error (with its line),
        another suffix, a YAML file without PyYAML, or a top level that is not a table.
    """
    stdin = str(path) == "-"
    world = os.environ.get("WORLD_SIZE", "1")
    if stdin and world.isdigit() and int(world) > 1:  # torchrun hands standard input to one process only
        raise PLLZooError(f"--config - under torchrun (WORLD_SIZE={world}): only one process reads standard input; "
                          "write the TOML to a file and give --config FILE")
    suffix = ".toml" if stdin else path.suffix.lower()
    if suffix not in {".toml", ".yaml", ".yml"}:
        raise PLLZooError(f"--config {path}: write a .toml or .yaml file, or - for TOML on standard input "
                          "(docs/config-example.toml)")
    try:
        if stdin:
            if sys.stdin is None:  # descriptor 0 closed when the program started (`<&-`, some cron or CI jobs)
                raise PLLZooError("--config -: standard input is closed; give the TOML on it, or --config FILE")
            text = click.get_text_stream("stdin").read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as f:  # not past the cap, whatever the file is (a device, a pipe)
                raw = f.read(MAX_BYTES + 1)
            text = raw.decode("utf-8-sig")
        if len(text) > MAX_BYTES:
            raise PLLZooError(f"--config {path}: larger than {MAX_BYTES // (1 << 20)} MiB; not a pllzoo config file")
    except (OSError, UnicodeDecodeError) as exc:
        raise PLLZooError(f"--config {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})") from None
    text = text.removeprefix("\ufeff")  # a byte-order mark (Windows editors write one): not TOML, not the user's
    ctx = click.get_current_context(silent=True)
    if stdin and ctx is not None:  # the command that continues a stopped bench gives it again (cli.bench)
        ctx.meta[META_STDIN] = text
    if suffix == ".toml":
        try:
            data = tomllib.loads(text)
        except (ValueError, RecursionError) as exc:  # TOMLDecodeError, an integer of 4300+ digits, or nesting too
            # deep (an outside review: `hp = [[[...` was a RecursionError traceback)
            why = "nested too deeply" if isinstance(exc, RecursionError) else exc
            raise PLLZooError(f"--config {path}: not valid TOML ({why})") from None
    else:
        data = _read_yaml(path, text)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise PLLZooError(f"--config {path}: the top level must be a table of options, not {type(data).__name__}")
    return data


def _read_yaml(path: Path, text: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise PLLZooError(f"--config {path}: reading YAML needs PyYAML; pip install pyyaml "
                          f"(or write the file as TOML)") from None
    try:
        return yaml.load(text, Loader=_yaml_loader(yaml))
    except RecursionError:
        raise PLLZooError(f"--config {path}: not valid YAML (nested too deeply)") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        line = f" at line {where.line + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None)
        raise PLLZooError(f"--config {path}: not valid YAML{line}{f' ({problem})' if problem else ''}") from None


_YAML12_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_YAML12_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                           r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


def _yaml_loader(yaml: Any) -> type:
    """PyYAML's safe loader with YAML 1.2's numbers (the core schema) instead of YAML 1.1's: ``010`` is ten, not
    octal eight (an outside review: ``seeds: [010]`` ran seed 8), ``0o10`` is eight, ``1e-1`` is a number (1.1:
    text), ``1:30`` is text (1.1: 90, base 60) and ``1_000`` is text; booleans stay PyYAML's."""

    class Loader(yaml.SafeLoader):
        def construct_yaml_int(self, node: Any) -> int:
            text = str(self.construct_scalar(node))
            if _YAML12_INT.fullmatch(text):
                base = 8 if text.startswith("0o") else 16 if text.startswith("0x") else 10
                return int(text[2:] if base != 10 else text, base)
            return super().construct_yaml_int(node)  # an explicit !!int in a YAML 1.1 form (0b11, 1:30): PyYAML's

        def construct_object(self, node: Any, deep: bool = False) -> Any:
            try:
                return super().construct_object(node, deep=deep)
            except (ValueError, IndexError, KeyError, AttributeError, TypeError, OverflowError):  # a tag's reader
                tag = node.tag.rpartition(":")[2]  # failing on its text (!!int "", !!bool maybe, ...): one line,
                what = f"{_short(node.value)} is no {tag}" if isinstance(node, yaml.ScalarNode) else f"a bad {tag}"
                raise yaml.constructor.ConstructorError(  # not PyYAML's traceback (an outside review)
                    None, None, what, node.start_mark) from None

        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen = set()  # a key given twice is refused, as TOML does (an outside review: the last one won)
            for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
                if key_node.tag == "tag:yaml.org,2002:merge":  # <<: keys merged in may be overridden
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) and key in seen:
                    raise yaml.constructor.ConstructorError(None, None, f"the key {_short(key)} is given twice",
                                                            key_node.start_mark)
                seen.add(key) if isinstance(key, (str, int, float, bool)) else None
            return super().construct_mapping(node, deep=deep)

        def compose_node(self, parent: Any, index: Any) -> Any:
            event = self.peek_event()  # an outside review: 291 bytes of aliases nested 7 deep made a 39 MB value
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
                raise yaml.composer.ComposerError(None, None, "anchors and aliases (&name, *name) are not allowed in "
                                                  "a config file; write the values out", event.start_mark)
            return super().compose_node(parent, index)

    Loader.yaml_implicit_resolvers = {  # the 1.1 number rules out (a copy: SafeLoader's own stay as they are)
        first: [(tag, rule) for tag, rule in rules if tag not in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")]
        for first, rules in yaml.SafeLoader.yaml_implicit_resolvers.items()}
    Loader.add_implicit_resolver("tag:yaml.org,2002:int", _YAML12_INT, list("-+0123456789"))
    Loader.add_implicit_resolver("tag:yaml.org,2002:float", _YAML12_FLOAT, list("-+0123456789."))
    Loader.add_constructor("tag:yaml.org,2002:int", Loader.construct_yaml_int)
    return Loader


def file_options(command: click.Command) -> dict[str, click.Option]:
    """The options a file may set, by key (the long option name without ``--``)."""
    out = {}
    for param in command.params:
        if isinstance(param, click.Option) and param.name not in NOT_IN_FILE:
            longs = [o for o in param.opts if o.startswith("--")]
            out[(longs[0] if longs else param.opts[0]).lstrip("-")] = param
    return out


def values(ctx: click.Context, data: dict[str, Any], where: str) -> tuple[dict[str, Any], list[str]]:
    """Check ``data`` (a file's table) against ``ctx.command``'s options.

    :returns: ``(default_map, hp_pairs)``: click values by parameter name, and the ``--hp`` pairs.
    :raises PLLZooError: one line naming the first unknown key (and the valid ones) or ill-typed value.
    """
    options = file_options(ctx.command)
    defaults: dict[str, Any] = {}
    hp_pairs: list[str] = []
    seen: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = str(raw_key).replace("_", "-")
        if key not in options:
            raise UnknownNameError(f"{where}: unknown key {_short(raw_key)}; valid: {', '.join(sorted(options))}")
        if key in seen:  # batch_size and batch-size: one option, given twice (the file format cannot tell)
            raise PLLZooError(f"{where}: {_short(seen[key])} and {_short(raw_key)} are the same option, given twice; "
                              "keep one")
        seen[key] = raw_key
        param = options[key]
        if param.name == "hps":
            hp_pairs = hp_strings(value, where)
            _refuse_twice(hp_pairs, where)
            continue
        value = _typed(param, key, value, where)
        try:
            param.type_cast_value(ctx, value)
        except (click.BadParameter, OverflowError) as exc:  # OverflowError: a float option given a 400-digit integer
            why = exc.format_message() if isinstance(exc, click.BadParameter) else exc
            raise UsageError(f"{where}: {key} = {_short(value)}: {why}") from None
        defaults[param.name] = value
    return defaults, hp_pairs


def _typed(param: click.Option, key: str, value: Any, where: str) -> Any:
    """``value`` if it has ``param``'s type (lists joined for ``methods``/``seeds``), else one error line."""
    if param.name in LIST_OPTIONS:
        items = value if isinstance(value, list) else [value]
        if param.name == "seeds" and all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            return ",".join(str(v) for v in items)
        if all(isinstance(v, str) for v in items):
            return ",".join(items)
        raise UsageError(f"{where}: {key} = {_short(value)}: write a list of {_what(param)}s or a comma-separated "
                         "string")
    if param.multiple:  # a list of the option's type (or one value)
        return [_typed_one(param, key, v, where) for v in (value if isinstance(value, list) else [value])]
    return _typed_one(param, key, value, where)


def _typed_one(param: click.Option, key: str, value: Any, where: str) -> Any:
    expected = _python_types(param)
    if expected is None:  # a parameter type this module does not know: click's conversion checks it
        return value
    if isinstance(value, bool) and bool not in expected or not isinstance(value, expected):
        raise UsageError(f"{where}: {key} = {_short(value)} is {_article(type(value).__name__)}; "
                          f"{key} takes {_what(param)}")
    return value


def _python_types(param: click.Option) -> tuple[type, ...] | None:
    """The Python types a file value of ``param`` may have (a flag: bool; numbers; text), or None."""
    if param.is_flag:
        return (bool,)
    kind = param.type
    if isinstance(kind, (click.types.IntParamType, click.IntRange)):
        return (int,)
    if isinstance(kind, (click.types.FloatParamType, click.FloatRange)):
        return (int, float)
    if isinstance(kind, click.types.BoolParamType):
        return (bool,)
    if isinstance(kind, (click.types.StringParamType, click.Choice, click.Path)):
        return (str,)
    return None


def _what(param: click.Option) -> str:
    if param.name in LIST_OPTIONS:
        return "integer" if param.name == "seeds" else "string"
    if isinstance(param.type, click.Choice):
        return "one of " + ", ".join(map(str, param.type.choices))
    names = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
    types = _python_types(param) or (str,)
    return names[float if float in types else types[0]]


def _article(name: str) -> str:
    return {"int": "an integer", "float": "a number", "str": "a string", "bool": "a boolean", "list": "a list",
            "dict": "a table", "NoneType": "null"}.get(name, name)


def hp_strings(value: Any, where: str) -> list[str]:
    """``--hp`` pairs of a file's ``hp``: a table (nested tables joined with dots) and/or ``"k=v"`` strings.

    Numbers, booleans and lists of them become the text ``--hp`` would take (``0.05``, ``true``, ``[100,150]``).
    """
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        pairs = []
        for item in value:
            pairs += hp_strings(item, where) if isinstance(item, (str, dict)) else _bad_hp(item, where)
        return pairs
    if isinstance(value, dict):
        return [f"{key}={_hp_text(key, v, where)}" for key, v in _flatten(value, "")]
    return _bad_hp(value, where)


def _refuse_twice(pairs: list[str], where: str) -> None:
    """One line for an ``hp`` key the file gives twice (an outside review: ``hp = {"train.epochs" = 4, train =
    {epochs = 5}}`` ran 5 epochs without a word), as for ``batch_size`` and ``batch-size``."""
    seen: dict[str, str] = {}
    for key, pair in _keyed(pairs):  # a malformed pair is left out: planning says so, naming the file
        if key in seen:
            raise UsageError(f"{where}: hp {_short(key)} is given twice ({_short(seen[key])} and {_short(pair)}); "
                             "keep one")
        seen[key] = pair


def _bad_hp(value: Any, where: str) -> list[str]:
    # a value the option's type refuses, as click's own for `epochs = "x"`: exit 2 (an outside review: it was 1)
    raise UsageError(f"{where}: hp = {_short(value)}: write a table (hp = {{\"train.lr\" = 0.05}}) "
                      f"or a list of \"key=value\" strings")


def _flatten(table: dict[str, Any], prefix: str) -> list[tuple[str, Any]]:
    out = []
    for key, value in table.items():
        full = f"{prefix}{key}"
        out += _flatten(value, full + ".") if isinstance(value, dict) else [(full, value)]
    return out


def _hp_text(key: str, value: Any, where: str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, (int, float, str)) and not isinstance(v, bool) for v in value):
        # in brackets, as written: a tuple field reads [700,800] as 700,800, and a single-value one refuses it
        # (an outside review: [3] passed as 3, and ["step","cosine"] was named 'step,cosine')
        return "[" + ",".join(v if isinstance(v, str) else repr(v) for v in value) + "]"
    raise PLLZooError(f"{where}: hp {key} = {_short(value)} is {_article(type(value).__name__)}; "
                      f"write a number, true/false, a string or a list of numbers")


def use_config(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """``--config``'s callback (eager): the file's values become the bench's defaults (``ctx.default_map``)."""
    if value is None:
        return None
    if META_REPLAY_HP in ctx.meta:
        raise PLLZooError("--from-run and --config exclude each other: --from-run replays a recorded run as it was")
    where = str(value)
    defaults, hp_pairs = values(ctx, read(Path(value)), where)
    ctx.default_map = {**(ctx.default_map or {}), **defaults}
    ctx.meta[META_HP] = hp_pairs
    ctx.meta[META_FILE_KEYS] = (where, set())  # filled in by overrides()
    return value


def overrides(ctx: click.Context, hps: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """The bench's hyper-parameter overrides: the file's ``hp``, then ``--hp`` (command line wins), or
    the replayed run's (:mod:`pllzoo.replay`, which refuses options that would change it).
    """
    from pllzoo import replay
    from pllzoo.planning import parse_overrides, scope_name

    if META_REPLAY_HP in ctx.meta:
        replay.refuse_changes(ctx)  # what --hp may still give: bookkeeping (replay.only_bookkeeping)
        return {**dict(ctx.meta[META_REPLAY_HP]), **parse_overrides(list(hps))}
    from_file = parse_overrides(ctx.meta.get(META_HP, []))
    if from_file and ctx.get_parameter_source("methods") == click.core.ParameterSource.COMMANDLINE:
        # spelt as the scopes are (an outside review: a mix with blanks around '+' lost the file's scoped hp)
        wanted = {scope_name(m) for m in str(ctx.params.get("methods") or "").split(",")}
        for key in [k for k in from_file if ":" in k and k.rpartition(":")[0] not in wanted]:
            warnings.warn(f"the config file's hp {_short(key)} is left out: --methods on the command line has no "
                          f"{key.rpartition(':')[0]!r}", stacklevel=2)  # narrowing a file's methods is no error
            del from_file[key]
    command_line = parse_overrides(list(hps))
    ctx.meta[META_FROM_FILE] = {p for p in ("epochs", "batch_size")  # for locate(): where each value came from
                                if ctx.get_parameter_source(p) == click.core.ParameterSource.DEFAULT_MAP}
    if META_FILE_KEYS in ctx.meta:
        ctx.meta[META_FILE_KEYS] = (ctx.meta[META_FILE_KEYS][0], {k.rpartition(":")[2] for k in from_file} -
                                    {k.rpartition(":")[2] for k in command_line})
    return {**from_file, **command_line}


_NAMED_KEY = (  # the hp key an error from planning names (an outside review: four of these forms went unmarked)
    re.compile(r"^bad value for ([\w.-]+)"),
    re.compile(r"^unknown hyper-parameter '?([^';\s]+?)'?;"),  # train.x (no quotes) and 'METHOD:slot.x'
    re.compile(r"^--hp ([^\s]+?): method "),  # a METHOD: scope that names no method of the bench
    re.compile(r"^(train\.\w+): unknown (?:model|view) "),
    re.compile(r"^model '[^']*' \(plugin [^)]*\) takes no argument '[^']*' \(--hp (model\.[^)\s]*)\)"),
)
_BAD_PAIR = re.compile(r"^bad --hp '(.*)'; write key=value")
_DISAGREE = re.compile(r"^--(epochs|batch-size) (\S+) and --hp train\.(\w+)=(.*) disagree; give one$")


def locate(ctx: click.Context, message: str) -> str:
    """``message`` with ``(config file FILE)`` added when it is a bad or unknown ``hp`` key that came from the
    config file alone, so that an error from deep in planning says where the value was written."""
    path, keys = ctx.meta.get(META_FILE_KEYS, (None, set()))
    clash = _DISAGREE.match(message)
    if path is not None and clash is not None:  # say where each value was written (an outside review: it named
        # an --epochs never typed, the config file's)
        flag, value, key, text = clash.groups()
        param = flag.replace("-", "_")
        where = "standard input" if str(path) == "-" else str(path)
        first = (f"{param} = {value} (config file {where})" if param in ctx.meta.get(META_FROM_FILE, ())
                 else f"--{flag} {value}")
        second = (f"hp train.{key}={text} (config file {where})" if f"train.{key}" in keys
                  else f"--hp train.{key}={text}")
        return f"{first} and {second} disagree; give one"
    found = next((m for m in (r.match(message) for r in _NAMED_KEY) if m is not None), None)
    if path is None:
        return _replayed(ctx, message, found)
    pair = _BAD_PAIR.match(message)
    if not (found is not None and found.group(1).rpartition(":")[2] in keys or
            pair is not None and pair.group(1) in ctx.meta.get(META_HP, ()) and pair.group(1) not in
            ctx.params.get("hps", ())):
        return message
    return f"{message} (config file {'standard input' if str(path) == '-' else path})"


def _replayed(ctx: click.Context, message: str, found: re.Match | None) -> str:
    """``message`` with where a replayed run recorded the value, when ``--from-run``'s record gave the key it names
    (an outside review: a hand-edited config.json's bad value read as if typed)."""
    run = ctx.meta.get("pllzoo.replay.run")  # pllzoo.replay.META_RUN: (run folder, recorded config)
    recorded = ctx.meta.get(META_REPLAY_HP)
    if run is None or recorded is None or found is None:
        return message
    typed = {k.rpartition(":")[2] for k, _ in _keyed(ctx.params.get("hps", ()))}
    key = found.group(1).rpartition(":")[2]
    given = {k.rpartition(":")[2] for k in recorded} | {  # a backbone argument: recorded in train.model_args
        f"model.{str(a).partition('=')[0]}" for k, v in recorded.items() if k.rpartition(":")[2] == "train.model_args"
        for a in (v or ())}
    if key not in given or key in typed:
        return message
    from pllzoo.replay import recorded_in

    return f"{message} (recorded in {recorded_in(Path(run[0]))})"


def _keyed(pairs: Any) -> list[tuple[str, str]]:
    """``(key, pair)`` of each ``key=value`` pair (:func:`pllzoo.planning.parse_overrides`); malformed ones left out."""
    from pllzoo.planning import parse_overrides

    out = []
    for pair in pairs or ():
        try:
            out += [(key, pair) for key in parse_overrides([pair])]
        except PLLZooError:
            continue
    return out
