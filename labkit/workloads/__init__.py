"""The models, data and training jobs the lessons run.

Imports core, instruments. Its modules (this part is written by tools/render_docs.py):

attention: Attention three ways: naive (the T×T scores in memory), tiled with an online softmax, and fused.
checkpoint: Checkpoints that a crash cannot fake, and a training job that is killed and resumed (notebook
    `checkpoints`).
data: Synthetic data that a model can actually learn, generated locally (no downloads).
diffusion: Image and video generation: a diffusion transformer, its sampler and a latent decoder, built locally.
experts: Mixture-of-experts: a top-k routed layer, with the counts that decide its time, memory and traffic.
large_batch: The optimisation half of "why not a huge batch?": steps to a target against batch size (notebook
    `batch_size`).
models: Models in sized families, built locally with random weights (nothing is downloaded).
precision: Lower-precision training and inference, built so that their memory can be measured (notebook `memory`).
"""
