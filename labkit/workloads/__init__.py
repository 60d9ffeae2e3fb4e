"""The models and data the lessons run (imports core, predict, instruments and claims).

models (sized MLP, CNN and GPT families; torchvision models with random weights), data (synthetic data that looks
like the real thing), precision (mixed-precision Adam, int8 weights), large_batch (steps to a target against batch),
diffusion (a diffusion transformer, its DDIM sampler and a latent decoder).
"""
