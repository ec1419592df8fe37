"""What the commands that run a BERT checkpoint share (embed, similar, extract-features, fill-mask,
attention): the --model/--device and -o/--overwrite arguments, the output and length checks done
before any work, and the stderr notes that say what was done to the input (truncated lines, blank lines)."""


MODEL_HELP = ("an HF-format BERT folder (config.json, model.safetensors or pytorch_model.bin, vocab.txt), "
              "a google-research/bert folder (bert_config.json, vocab.txt, bert_model.ckpt.index and .data-*), "
              "or 'minilm' for the packaged all-MiniLM-L6-v2")


def add_checkpoint_arguments(p):
    """--model and --device: the arguments every command that loads a BERT checkpoint shares."""
    p.add_argument("--model", required=True, help=MODEL_HELP)
    p.add_argument("--device", default="auto", help="cpu, cuda, mps or auto (default)")


def add_output_arguments(p, required: bool, metavar: str, help: str):
    p.add_argument("-o", "--output", required=required, metavar=metavar, help=help)
    p.add_argument("--overwrite", action="store_true", help="replace OUT if it exists (refused otherwise)")


def numbered(numbers, noun: str = "line", shown: int = 10) -> str:
    """[3, 7] -> "lines 3, 7": the first `shown` numbers (counting from 1) for a note."""
    listed = ", ".join(map(str, numbers[:shown])) + (", ..." if len(numbers) > shown else "")
    return f"{noun if len(numbers) == 1 else noun + 's'} {listed}"


def truncation_note(cut: list[int], total: int, max_seq_length: int, what: str = "lines",
                    noun: str = "line") -> str | None:
    """The stderr note naming the lines (numbered from 1) that were cut, or None when none was."""
    if not cut:
        return None
    return (f"note: {len(cut)} of {total} {what} were longer than --max-seq-length {max_seq_length} "
            f"tokens and were truncated ({numbered(cut, noun)})")
