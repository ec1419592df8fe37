"""The notes' embedding-sum example (file 001, "bert模型结构解析"): one token's token, position and
segment embeddings summed, equal to its one-hot [token | position | segment] vector times the
three tables stacked into one matrix."""
import torch
import torch.nn.functional as F

from ..models import BertConfig
from ..models.bert import BertEmbeddings
from . import Shown, rounded

TOKEN_TABLE = [[-3, -2, -1, 0], [1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14, 15, 16]]
POSITION_TABLE = [[17, 18, 19, 20], [21, 22, 23, 24], [25, 26, 27, 28], [29, 30, 31, 32], [33, 34, 35, 36],
                  [37, 38, 39, 40]]
SEGMENT_TABLE = [[41, 42, 43, 44], [45, 46, 47, 48]]
TOKEN_ID, POSITION, SEGMENT_ID = 2, 0, 0

NOTES = {"token": [5, 6, 7, 8], "position": [17, 18, 19, 20], "segment": [41, 42, 43, 44],
         "sum": [63, 66, 69, 72], "one_hot": [0, 0, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0],
         "one_hot_matmul": [63, 66, 69, 72]}


def notes_embeddings() -> BertEmbeddings:
    """BERT's embedding layer at the notes' sizes (vocabulary 5, 6 positions, 2 segments, width 4)
    holding the notes' tables."""
    config = BertConfig(vocab_size=len(TOKEN_TABLE), hidden_size=4, num_attention_heads=1,
                        max_position_embeddings=len(POSITION_TABLE), type_vocab_size=len(SEGMENT_TABLE))
    emb = BertEmbeddings(config)
    with torch.no_grad():
        emb.word_embeddings.weight.copy_(torch.tensor(TOKEN_TABLE))
        emb.position_embeddings.weight.copy_(torch.tensor(POSITION_TABLE))
        emb.token_type_embeddings.weight.copy_(torch.tensor(SEGMENT_TABLE))
    return emb


def embedding_sum() -> Shown:
    shown = Shown("token + position + segment embeddings", "001, bert模型结构解析 (the embedding-sum code)")
    emb = notes_embeddings()
    with torch.no_grad():
        # the token alone at position 0: sum_embeddings adds the position rows of 0..len-1
        summed = emb.sum_embeddings(torch.tensor([[TOKEN_ID]]), torch.tensor([[SEGMENT_ID]]))[0, POSITION]
        parts = {"token": emb.word_embeddings.weight[TOKEN_ID], "position": emb.position_embeddings.weight[POSITION],
                 "segment": emb.token_type_embeddings.weight[SEGMENT_ID]}
        one_hot = torch.cat([F.one_hot(torch.tensor(TOKEN_ID), len(TOKEN_TABLE)),
                             F.one_hot(torch.tensor(POSITION), len(POSITION_TABLE)),
                             F.one_hot(torch.tensor(SEGMENT_ID), len(SEGMENT_TABLE))]).float()
        stacked = torch.cat([emb.word_embeddings.weight, emb.position_embeddings.weight,
                             emb.token_type_embeddings.weight])
        via_one_hot = one_hot @ stacked
    shown.say(f"token id {TOKEN_ID}, position {POSITION}, segment {SEGMENT_ID}; "
              "bertlab: models.bert.BertEmbeddings.sum_embeddings with the notes' three tables")
    for name, ours in parts.items():
        shown.compare(f"{name} embedding", NOTES[name], rounded(ours))
    shown.compare("sum", NOTES["sum"], rounded(summed))
    shown.compare("one-hot [tok|pos|seg]", NOTES["one_hot"], [int(v) for v in one_hot.tolist()])
    shown.compare("one-hot @ tables", NOTES["one_hot_matmul"], rounded(via_one_hot))
    shown.values.update(summed=summed, via_one_hot=via_one_hot, one_hot=one_hot, **parts)
    return shown
