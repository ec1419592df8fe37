from .folder import LoadReport, read_state_dict, write_hf_folder
from .hf_bert import hf_state_dict, init_from_state_dict, load_state_dict_strict, save_pretrained
from .load import LoadedModel, load_model
from .pretrained import load_pretrained, load_tokenizer, max_seq_length, read_config, resolve

__all__ = ["LoadReport", "LoadedModel", "hf_state_dict", "init_from_state_dict", "load_model", "load_pretrained",
           "load_state_dict_strict", "load_tokenizer", "max_seq_length", "read_config", "read_state_dict", "resolve",
           "save_pretrained", "write_hf_folder"]
