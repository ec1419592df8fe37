from .bert import (BertEmbeddings, BertForPreTraining, BertForSequenceClassification, BertModel, BertOutput,
                   MaskedLMHead, NextSentenceHead, Pooler)
from .bert_config import BertConfig

__all__ = ["BertConfig", "BertEmbeddings", "BertForPreTraining", "BertForSequenceClassification", "BertModel",
           "BertOutput", "MaskedLMHead", "NextSentenceHead", "Pooler"]
from .gpt import GPT, GPTConfig

__all__ += ["GPT", "GPTConfig"]
