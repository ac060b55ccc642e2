"""A progress bar on a terminal: tqdm when it is installed, else one redrawn line. When the
output is not a terminal (a log file, CI), a plain line every `interval` seconds while the
stage runs and a summary line at its end. `unit` names what the bar counts (the report's
tables may count something else: schedules where the bar counts families); `note`, set before
the end, says why a stage ended short of its total."""
import sys
import time


class Progress:
    def __init__(self, total, desc, enabled=True, file=None, interval=10.0, unit=""):
        self.total, self.desc, self.n = total, desc, 0
        self.unit, self.note = unit, None
        self.file = file or sys.stderr
        self.enabled = enabled and total > 0
        self.interval = interval
        self._bar, self._t0, self._shown = None, time.perf_counter(), -1
        self._last_line = self._t0
        if not self.enabled or not self._tty():
            return                        # redrawn bars would flood a log with lines
        try:
            from tqdm import tqdm
        except ImportError:
            return
        self._bar = tqdm(total=total, desc=desc, file=self.file, leave=True,
                         dynamic_ncols=True, mininterval=0.5, unit=f" {unit}" if unit else "it")

    def update(self, n=1, note=None):
        self.n += n
        if not self.enabled:
            return
        if self._bar is not None:
            if note:
                self._bar.set_postfix_str(note, refresh=False)
            self._bar.update(n)
        elif not self._tty():
            now = time.perf_counter()
            if now - self._last_line >= self.interval:
                self._last_line = now
                self.file.write(f"{self.desc}: {self.n}/{self.total}{self._unit()} "
                                f"({100 * self.n // self.total} %) after {now - self._t0:.0f} s"
                                f"\n")
                self.file.flush()
        else:
            pct = int(100 * self.n / self.total)
            if pct != self._shown:
                self._shown = pct
                fill = pct * 30 // 100
                self.file.write(f"\r{self.desc} [{'#' * fill}{'.' * (30 - fill)}] "
                                f"{self.n}/{self.total}{self._unit()}")
                self.file.flush()

    def close(self):
        if not self.enabled:
            return
        if self._bar is not None:
            if self.note:
                self._bar.set_postfix_str(self.note, refresh=True)
            self._bar.close()
            return
        secs = time.perf_counter() - self._t0
        lead = "\r" if self._tty() else ""
        note = f" ({self.note})" if self.note else ""
        self.file.write(f"{lead}{self.desc}: {self.n}/{self.total}{self._unit()}{note} in "
                        f"{secs:.1f} s{' ' * 20}\n")
        self.file.flush()

    def _unit(self):
        return f" {self.unit}" if self.unit else ""

    def _tty(self):
        return hasattr(self.file, "isatty") and self.file.isatty()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
