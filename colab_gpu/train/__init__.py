"""The training layer: models, a training step and epoch (`steps`), `fit`, its history and checkpoints, precision
and TF32, torch.compile, the largest batch, activations, DDP and torchrun (`parallel`), pretrained image models.
It imports hardware, measure and data.
"""
