from .hf_bert import (LoadReport, hf_state_dict, init_from_state_dict, load_state_dict_strict, read_state_dict,
                      save_pretrained)
from .pretrained import load_pretrained, load_tokenizer, max_seq_length, read_config, resolve

__all__ = ["LoadReport", "hf_state_dict", "init_from_state_dict", "load_state_dict_strict", "read_state_dict",
           "save_pretrained", "load_pretrained", "load_tokenizer", "max_seq_length", "read_config", "resolve"]
