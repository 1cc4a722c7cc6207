"""A tiny transformers model built from a config (nothing downloaded), trained with DDP.

Launched by torchrun on every host (``torch_distributed``); rank 0 saves the model with
``save_pretrained`` into SM_MODEL_DIR.
"""

import argparse
import json
import os

import torch
import torch.distributed as dist
from transformers import BertConfig, BertForSequenceClassification

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--lr", type=float, default=0.01)
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
config = BertConfig(
    vocab_size=64,
    hidden_size=32,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=64,
    max_position_embeddings=16,
    num_labels=2,
)
model = torch.nn.parallel.DistributedDataParallel(BertForSequenceClassification(config))
data = torch.load(os.path.join(os.environ["SM_CHANNEL_TRAIN"], "tokens.pt"))
ids, labels = data["input_ids"][rank::world], data["labels"][rank::world]
optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
for epoch in range(args.epochs):
    optimizer.zero_grad()
    loss = model(input_ids=ids, labels=labels).loss
    loss.backward()
    optimizer.step()
    print(f"epoch={epoch} rank={rank} loss={loss.item():.4f}")
total = torch.tensor([float(rank + 1)])
dist.all_reduce(total)
if rank == 0:
    model.module.save_pretrained(os.environ["SM_MODEL_DIR"])
report = {
    "rank": rank,
    "world": world,
    "sum": total.item(),
    "host": os.environ["SM_CURRENT_HOST"],
    "offline": os.environ.get("HF_HUB_OFFLINE"),
}
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"rank-{rank}.json"), "w") as f:
    json.dump(report, f)
dist.destroy_process_group()
