"""`python -m agent --config FILE`: run a site's agent until SIGTERM or Ctrl-C."""

from __future__ import annotations

import argparse
import faulthandler
import logging
import signal
import sys
from types import FrameType

from .config import ConfigError, config_load
from .loop import Agent


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent", description="The Data Challenge Portal's site agent.")
    parser.add_argument("--config", required=True, help="the JSON file manage.py agent_enroll wrote")
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")
    options = parser.parse_args(argv)
    logging.basicConfig(level=options.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = config_load(options.config)
    except ConfigError as exc:
        print(f"agent: {exc}", file=sys.stderr)
        return 2
    agent = Agent(config)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 PID`: every thread's stack, to the log

    def stop(signum: int, frame: FrameType | None) -> None:
        agent.stop()
        raise Stopping  # out of a long poll's read at once

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        agent.run()
    except Stopping:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        agent.drain()
    return 0


class Stopping(BaseException):
    """SIGTERM or Ctrl-C: the agent stops (BaseException: no `except Exception` of the loop catches it)."""


if __name__ == "__main__":
    sys.exit(main())
