from .bert import BertEmbeddings, BertForPreTraining, BertModel, BertOutput, MaskedLMHead, NextSentenceHead, Pooler
from .bert_config import BertConfig
from .bert_tasks import (BertForMultipleChoice, BertForQuestionAnswering, BertForSequenceClassification,
                         BertForTokenClassification)

__all__ = ["BertConfig", "BertEmbeddings", "BertForMultipleChoice", "BertForPreTraining", "BertForQuestionAnswering",
           "BertForSequenceClassification", "BertForTokenClassification", "BertModel", "BertOutput", "MaskedLMHead",
           "NextSentenceHead", "Pooler"]
from .gpt import GPT, GPTConfig

__all__ += ["GPT", "GPTConfig"]
