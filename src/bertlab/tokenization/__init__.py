"""WordPiece tokenization, exactly as google-research/bert's tokenization.py."""

from .basic import BasicTokenizer, is_chinese_char, is_control, is_punctuation, is_whitespace
from .bert_tokenizer import BertTokenizer
from .encoding import BatchEncoding, Encoding, truncate_seq_pair
from .vocab import CLS, MASK, PAD, SEP, UNK, Vocab
from .wordpiece import WordpieceTokenizer

__all__ = [
    "BasicTokenizer", "BatchEncoding", "BertTokenizer", "Encoding", "Vocab", "WordpieceTokenizer",
    "truncate_seq_pair", "is_chinese_char", "is_control", "is_punctuation", "is_whitespace",
    "CLS", "MASK", "PAD", "SEP", "UNK",
]
