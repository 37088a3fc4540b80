"""`python -m transformer_lit.cli ARGS` (how torchrun starts the command) runs `main`.

Written by hand, the one module of the package that is: nbdev exports one module per
notebook, and these lines need no chapter of their own (chapter 32 writes `main`)."""

import sys

from transformer_lit.cli import main

if __name__ == "__main__":
    sys.exit(main())
