"""Trace settings as a gRPC TraceSettingRequest carries them: each key a
list of strings, an empty list clearing the setting (Triton's texts)."""

from __future__ import annotations

from tritonserver import InvalidArgumentError, UnsupportedError
from tritonserver._trace import FIELDS, NewSetting, parse_levels, parse_number


def parse_grpc(settings: dict[str, list[str]]) -> NewSetting:
    """The update in a gRPC TraceSettingRequest's settings (an empty value
    list clears a setting)."""
    if "trace_file" in settings:
        raise UnsupportedError("trace file location can not be updated through network protocol")
    new: NewSetting = {}
    for key, name in FIELDS.items():
        if key not in settings:
            continue
        values = list(settings[key])
        if not values:
            new[name] = None
        elif key == "trace_level":
            level = parse_levels(values)
            if level is not None:
                new[name] = level
        elif len(values) != 1:
            raise InvalidArgumentError(f"expect only 1 value for '{key}'")
        else:
            new[name] = parse_number(key, values[0], http=False)
    return new
