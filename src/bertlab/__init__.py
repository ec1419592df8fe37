"""bertlab: the Transformer family end to end — an exact BERT, the seq2seq Transformer and GPT."""
from .inference import embed_texts, top_k
from .interop import load_pretrained, save_pretrained
from .models import BertConfig, BertForPreTraining, BertForSequenceClassification, BertModel
from .tokenization import BertTokenizer

__version__ = "0.1.0"
__all__ = ["BertConfig", "BertForPreTraining", "BertForSequenceClassification", "BertModel", "BertTokenizer",
           "embed_texts", "load_pretrained", "save_pretrained", "top_k"]
