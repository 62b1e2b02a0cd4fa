"""scripts/tool SUBCOMMAND ...: each subcommand is a module with add_arguments(parser) and
run(args), which returns the exit status."""

import argparse
import sys

from . import __doc__ as overview
from . import bench, certificate, dataset, dockerfile_check, export, soak, syscalls
from .verify import httparena, httparena_gateway, tfb


def first_paragraph(module):
    return module.__doc__.split("\n\n")[0]


def command(subparsers, name, module):
    parser = subparsers.add_parser(name, help=first_paragraph(module), description=module.__doc__,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
    module.add_arguments(parser)
    parser.set_defaults(run=module.run)


def parser():
    top = argparse.ArgumentParser(prog="scripts/tool", description=overview,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = top.add_subparsers(required=True, metavar="SUBCOMMAND")
    verify = commands.add_parser("verify", help="check a running server as a venue does")
    venues = verify.add_subparsers(required=True, metavar="VENUE")
    command(venues, "tfb", tfb)
    command(venues, "httparena", httparena)
    command(venues, "gateway", httparena_gateway)
    export_parser = commands.add_parser("export", help=first_paragraph(export))
    export.add_venues(export_parser.add_subparsers(required=True, metavar="VENUE"))
    command(commands, "dockerfile-check", dockerfile_check)
    command(commands, "bench", bench)
    command(commands, "soak", soak)
    command(commands, "syscalls", syscalls)
    command(commands, "dataset", dataset)
    command(commands, "certificate", certificate)
    return top


def main(argv=None):
    args = parser().parse_args(argv)
    return args.run(args) or 0


if __name__ == "__main__":
    sys.exit(main())
