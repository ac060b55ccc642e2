"""A progress bar on a terminal: tqdm when it is installed, else one redrawn line. When the
output is not a terminal (a log file, CI), a plain line every `interval` seconds while the
stage runs and a summary line at its end."""
import sys
import time


class Progress:
    def __init__(self, total, desc, enabled=True, file=None, interval=10.0):
        self.total, self.desc, self.n = total, desc, 0
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
                         dynamic_ncols=True, mininterval=0.5)

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
                self.file.write(f"{self.desc}: {self.n}/{self.total} "
                                f"({100 * self.n // self.total} %) after {now - self._t0:.0f} s"
                                f"\n")
                self.file.flush()
        else:
            pct = int(100 * self.n / self.total)
            if pct != self._shown:
                self._shown = pct
                fill = pct * 30 // 100
                self.file.write(f"\r{self.desc} [{'#' * fill}{'.' * (30 - fill)}] "
                                f"{self.n}/{self.total}")
                self.file.flush()

    def close(self):
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.close()
            return
        secs = time.perf_counter() - self._t0
        lead = "\r" if self._tty() else ""
        self.file.write(f"{lead}{self.desc}: {self.n}/{self.total} in {secs:.1f} s"
                        f"{' ' * 20}\n")
        self.file.flush()

    def _tty(self):
        return hasattr(self.file, "isatty") and self.file.isatty()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
