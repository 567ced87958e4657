"""The executable's trace flags: the repeatable ``--trace-config
[<mode>,]<setting>=<value>`` and the deprecated ``--trace-file``,
``--trace-level``... read into Tracing.configure's arguments, with its texts.
Mode opentelemetry's settings are read by tritonserver._otel (which needs the
otel extra)."""

from __future__ import annotations

from typing import Any, Optional

from tritonserver._trace import DISABLED, TENSORS, TIMESTAMPS, option_number, stoi


# The executable's deprecated flags: argparse dest -> (flag, what replaces it).
DEPRECATED_FLAGS = {
    "trace_file": ("--trace-file", "'--trace-config triton,file=<filepath>"),
    "trace_level": ("--trace-level", "'--trace-config level=<OFF|TIMESTAMPS|TENSORS>"),
    "trace_rate": ("--trace-rate", "'--trace-config rate=<rate value>"),
    "trace_count": ("--trace-count", "'--trace-config count=<count value>"),
    "trace_log_frequency": ("--trace-log-frequency",
                            "'--trace-config triton,log-frequency=<log frequency value>"),
}


def deprecation_warnings(deprecated: dict[str, Any]) -> list[str]:
    """The executable's warning for each deprecated trace flag given."""
    return [f"Warning: '{flag}' has been deprecated and will be removed in future releases. "
            f"Please use {instead} instead."
            for key, (flag, instead) in DEPRECATED_FLAGS.items() if deprecated.get(key)]


def start_settings(configs: list[str],
                   deprecated: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """Tracing.configure's arguments from the executable's repeatable
    ``--trace-config [<mode>,]<setting>=<value>`` flags (which override the
    deprecated ``--trace-file``, ``--trace-level``... given in `deprecated`,
    keyed as DEPRECATED_FLAGS), with its errors (raised as ValueError)."""
    level = DISABLED
    disabled = False
    out: dict[str, Any] = {"trace_file": "", "rate": 1000, "count": -1, "log_frequency": 0}
    old = deprecated or {}
    for key, target in (("trace_file", "trace_file"), ("trace_level", "level"),
                        ("trace_rate", "rate"), ("trace_count", "count"),
                        ("trace_log_frequency", "log_frequency")):
        value = old.get(key)
        if not value:
            continue
        try:
            if key == "trace_file":
                out[target] = value
            elif key == "trace_level":
                for name in value:
                    parsed = _option_level(name)
                    disabled |= parsed == DISABLED
                    level |= parsed
            else:
                out[target] = _option_int(value)
        except ValueError as e:
            raise ValueError(f'Bad option: "{DEPRECATED_FLAGS[key][0]}".\n{e}') from None
    global_entries: list[tuple[str, str]] = []
    triton_entries: list[tuple[str, str]] = []
    otel_entries: list[tuple[str, str]] = []
    mode = "triton"
    for arg in configs:
        comma = arg.find(",")
        if comma == 0:
            raise ValueError("No trace mode specified. --trace-config option format is "
                             "<trace mode>,<setting>=<value> or <setting>=<value>. Got " + arg)
        entry_mode = ""
        if comma > 0:
            entry_mode = _trace_mode(arg[:comma])
        eq = arg.find("=", comma + 1)
        setting, value = (arg[comma + 1:eq], arg[eq + 1:]) if eq >= 0 else ("", "")
        if eq < 0 or not setting or not value:
            raise ValueError("--trace-config option format is "
                             "'<trace mode>,<setting>=<value>'. Got " + arg)
        if entry_mode == "triton":
            triton_entries.append((setting, value))
        elif entry_mode == "":
            global_entries.append((setting, value))
        else:
            otel_entries.append((setting, value))
    for setting, value in global_entries:
        try:
            if setting == "rate":
                out["rate"] = _option_int(value)
            elif setting == "level":
                parsed = _option_level(value)
                disabled |= parsed == DISABLED
                level |= parsed
            elif setting == "mode":
                mode = _trace_mode(value)
            elif setting == "count":
                out["count"] = _option_int(value)
        except ValueError as e:
            raise ValueError(f'Bad option: "--trace-config {setting}".\n{e}') from None
    out["level"] = DISABLED if disabled else level
    out["mode"] = mode
    if mode == "opentelemetry":
        # The triton settings (file, log frequency) are not read in this mode.
        from tritonserver._otel import OtelConfig

        out["otel"] = OtelConfig.parse(otel_entries)
        return out
    extras: list[tuple[str, str]] = []
    for setting, value in triton_entries:
        try:
            if setting == "file":
                out["trace_file"] = value
            elif setting == "log-frequency":
                out["log_frequency"] = _option_int(value)
            else:
                extras.append((setting, value))
        except ValueError as e:
            raise ValueError(f'Bad option: "--trace-config triton,{setting}".\n{e}') from None
    out["extras"] = extras
    return out


def _trace_mode(text: str) -> str:
    mode = text.lower()
    if mode not in ("triton", "opentelemetry"):
        raise ValueError(f"invalid value for trace mode option: {mode}. Available options are "
                         '"triton" and "opentelemetry"')
    return mode


def _option_int(text: str) -> int:
    return option_number(stoi, text)


def _option_level(text: str) -> int:
    value = text.lower()
    if value in ("false", "off"):
        return DISABLED
    if value in ("true", "on", "min", "max", "timestamps"):
        return TIMESTAMPS
    if value == "tensors":
        return TENSORS
    raise ValueError("invalid value for trace level option: " + value)

