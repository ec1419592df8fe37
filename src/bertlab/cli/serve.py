"""bertlab serve: models over HTTP with a JSON API, dynamic batching and a web page."""
import argparse
import ipaddress
import re

from .args import flags_for
from .model_args import add_device_argument

EXAMPLE = """examples:
  bertlab serve --model minilm=minilm                       # then open http://127.0.0.1:8000/
  bertlab serve --model minilm=minilm --model tagger=runs/ner/model --model gpt=runs/gpt/model --port 8080
  curl -s localhost:8000/v1/embed -H 'content-type: application/json' \\
       -d '{"model": "minilm", "texts": ["hello world"]}'

DIR is any folder `bertlab` reads (load_model): a packaged name such as "minilm", a BERT folder
(embed, similar, attention; fill-mask when it has a masked-LM head), a `bertlab finetune` folder
(classify, ner or qa), a GPT folder (generate) or a translation folder (translate). The API
documentation is at /docs; OpenAI's /v1/embeddings, TEI's /embed, /tokenize, /info and /health, and
Prometheus' /metrics answer beside it. Requests that arrive within --max-wait-ms of each other run as
one batch of up to --max-batch-size texts and --max-batch-tokens tokens; past --max-queue waiting
requests (a model) or --max-concurrent-requests (the server) the server answers 429. An input longer
than the model reads is refused (413) unless the request says "truncate": true.

Every model is loaded before the server listens: one that fails to load stops it with the reason
(exit 2), unless --keep-going. A request body past --max-body-bytes is refused (413) as it arrives."""


def add_parser(subparsers):
    from .args import nonnegative_float, positive_int
    p = subparsers.add_parser(
        "serve", help="serve models over HTTP (JSON API, dynamic batching, a web page at /)",
        description="Load each model and answer HTTP requests for it: embed, similar, classify, ner, qa, fill-mask, "
                    "translate, generate (streamed) and attention, with a web page at / and the OpenAPI docs at "
                    "/docs; also OpenAI's /v1/embeddings, TEI's /embed, /tokenize, /info and /health, and "
                    "/metrics for Prometheus. Needs the [serve] extra: pip install 'bertlab[serve]'.",
        epilog=EXAMPLE, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", action="append", required=True, metavar="NAME=DIR", type=model_spec,
                   help="a model to serve under NAME (repeatable)")
    p.add_argument("--host", type=host_address, default="127.0.0.1",
                   help="IP address or host name to listen on (127.0.0.1: this machine only; 0.0.0.0: every network)")
    p.add_argument("--port", type=port_number, default=8000, help="port, 0 to 65535 (8000; 0: any free port)")
    p.add_argument("--max-batch-size", type=positive_int, default=32,
                   help="texts run together in one forward pass (32; 1 serves one request at a time)")
    p.add_argument("--max-wait-ms", type=nonnegative_float, default=5.0,
                   help="how long the first request of a batch waits for company (5 ms)")
    p.add_argument("--max-batch-tokens", type=positive_int, default=16384,
                   help="tokens run together in one batch, as TEI's flag (16384): a batch fills by tokens as well as "
                        "by --max-batch-size, and its forward passes run longest first within it")
    p.add_argument("--max-queue", type=positive_int, default=256,
                   help="requests waiting per model before new ones get 429 (256)")
    p.add_argument("--max-concurrent-requests", type=positive_int, default=512,
                   help="task requests answered at once, all models together (512); past it a new one gets 429 at "
                        "once instead of waiting")
    p.add_argument("--max-chars", type=positive_int, default=10_000, help="characters per text (10000; past it: 413)")
    p.add_argument("--max-texts", type=positive_int, default=64, help="texts per request (64; past it: 413)")
    p.add_argument("--max-new-tokens", type=positive_int, default=256,
                   help="the most tokens one generate request may ask for (256; past it: 413)")
    p.add_argument("--max-body-bytes", type=positive_int, default=4 * 1024 * 1024, metavar="BYTES",
                   help="the largest request body, counted as it arrives (4194304 = 4 MiB; past it: 413, before "
                        "anything is parsed)")
    p.add_argument("--keep-going", action="store_true",
                   help="if a model fails to load, log why and serve the others (/readyz answers 200 \"degraded\" "
                        "and names the failed ones); by default a model that fails stops the server before it listens")
    add_device_argument(p)
    p.add_argument("--int8", action="store_true",
                   help="run every model's linear layers as dynamic int8 on the CPU (docs/guide/export.md: speed and "
                        "quality cost measured on real data)")
    p.add_argument("--no-access-log", action="store_true", help="do not log a line per request (saves CPU under load)")
    p.set_defaults(run=run)


def model_spec(text: str) -> tuple[str, str]:
    name, sep, folder = text.partition("=")
    if not sep or not name.strip() or not folder.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected NAME=DIR, e.g. minilm=minilm or tagger=runs/ner/model")
    return name.strip(), folder.strip()


def port_number(text: str) -> int:
    # checked here: a port past 65535 was taken modulo 65536 further down (--port 70000 listened on 4464)
    if not re.fullmatch(r"0*[0-9]{1,5}", text) or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port: give a whole number from 0 to 65535")
    return int(text)


_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")  # a host name's part (RFC 1123)


def host_address(text: str) -> str:
    """An IP address (v4 or v6) or a host name; anything else (empty, a URL, host:port, 256.1.1.1)
    is refused here rather than by the socket layer once every model has loaded."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    labels = text.removesuffix(".").split(".")
    # a last label of digits only is a mistyped IPv4 address, never a host name
    if len(text) <= 253 and all(_LABEL.fullmatch(label) for label in labels) and not labels[-1].isdigit():
        return text
    raise argparse.ArgumentTypeError(f"{text!r} is not an IP address or a host name "
                                     "(e.g. 127.0.0.1, 0.0.0.0, ::1 or localhost)")


def run(args):
    try:
        from ..serve import Limits, create_app, serve
    except ImportError as e:
        raise ValueError(f"bertlab serve needs the [serve] extra (pip install 'bertlab[serve]'): {e}") from None
    models = dict(args.model)
    if len(models) < len(args.model):
        raise ValueError("--model: a NAME is given twice; each model needs its own name")
    # serve passes its **app_options on to create_app, so create_app's parameters are read as well
    serve(**flags_for(serve, args, create_app, models=models, access_log=not args.no_access_log,
                      limits=Limits(**flags_for(Limits, args))))
    return 0
