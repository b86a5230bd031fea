"""Which calls a dump keeps: every call, a list of names or APIs, or a range of calls (ptdbg's scope)."""

from __future__ import annotations

from tscore.dump.config import DumpConfig
from tscore.dump_format.names import CallName, canonical, parse_name


def inside(path: str, outer: str) -> bool:
    """Say whether the module at ``path`` lies inside the one at ``outer`` (the root holds every module)."""
    return outer == "" or path.startswith(outer + ".")


class CallFilter:
    """Which calls a config dumps: everything, a list of names or APIs, or a range of calls."""

    def __init__(self, config: DumpConfig) -> None:
        """Read the config's ``list``, ``apis`` and ``scope``; a range starts closed until its first call."""
        self.names: set[str] = set()
        self.fragments: list[str] = []
        self.apis = {api.strip().lower() for api in config.apis}
        for entry in config.api_list:
            parsed = parse_name(entry)
            if parsed is not None:
                self.names.add(parsed.ptdbg)
            else:
                self.fragments.append(entry.strip())
        self.scope = [canonical(name) for name in config.scope]
        self.in_range = not self.scope
        self.range_done = False
        self.seen: set[str] = set()
        # no list, API or range given: every call is wanted, and no name needs spelling out to say so
        self.everything = not (self.names or self.fragments or self.apis or self.scope)

    def wants(self, name: CallName) -> bool:
        """Say whether the call named ``name`` is dumped, moving the range on as its ends go by."""
        if self.everything:
            return True
        full = name.ptdbg
        self.seen.add(full)
        if self.scope:
            if not self.in_range and not self.range_done and full == self.scope[0]:
                self.in_range = True
            if not self.in_range:
                return False
            if full == self.scope[1]:
                self.in_range, self.range_done = False, True
                return self.listed(name, full)
        return self.listed(name, full)

    def listed(self, name: CallName, full: str) -> bool:
        """Say whether a list or API filter names the call (``full``: its ptdbg name), range aside."""
        if not self.names and not self.fragments and not self.apis:
            return True
        if full in self.names or name.api.lower() in self.apis:
            return True
        spelled = name.msprobe
        return any(fragment in full or fragment in spelled for fragment in self.fragments)
