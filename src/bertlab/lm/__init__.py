"""GPT: a causal language model trained on text files. data.py makes the tokenizer and token files,
token_stream.py reads them, objective.py is next-token prediction on the one engine, job.py is
`bertlab gpt-train`."""
