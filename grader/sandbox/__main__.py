import sys

from .runner import main

main(sys.argv[1], int(sys.argv[2]))
