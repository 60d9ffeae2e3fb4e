"""Bad input to the helpers a learner calls: each case gets a clear error naming the argument and what is allowed.

One row per bad input, tried as a careful tester would (negative, fractional, NaN and infinite sizes and rates, a
string where a model belongs, unknown names). The error type and the words of the message are part of the
contract: a learner reads them. Deliberately accepted: a fractional parameter count (``state_bytes(7e9, ...)`` is
how large models are written), and an async "blocked" time above the save time (measured separately, noise can
order them either way; the model treats the write as zero). The serving engine's requests, the HTTP front end,
the background trainer and the settings have their own tables in their test modules.
"""

import math
import re

import pytest
import torch

import labkit
from labkit.core import device as dv
from labkit.core.errors import CheckpointError
from labkit.instruments import ceilings as ce
from labkit.instruments import flops as fl
from labkit.instruments import memory as me
from labkit.instruments import timing as tm
from labkit.lab import exercises as ex
from labkit.lab import sizes as sz
from labkit.predict import comm_model as cm
from labkit.predict import estimate as est
from labkit.predict import memory_model as mm
from labkit.predict import scaling as sc
from labkit.serving import batcher as ba
from labkit.serving import loads as lo
from labkit.workloads import checkpoint as ck
from labkit.workloads import data as da
from labkit.workloads import diffusion as di
from labkit.workloads import models as mo

nan, inf = math.nan, math.inf


def f():
    return None


def mlp():
    return mo.build_model("mlp", "s")


def link():
    return cm.fit_link([1e3, 1e6], [1e-4, 1e-3], 2)


CASES = [
    # memory model
    (
        "bytes_per_parameter unknown recipe",
        lambda: mm.bytes_per_parameter("fp33 adam"),
        ValueError,
        "unknown recipe 'fp33 adam'; allowed: fp32 inference, bf16 inference,",
    ),
    (
        "bytes_per_parameter None",
        lambda: mm.bytes_per_parameter(None),
        TypeError,
        "recipe must be a string, one of: fp32 inference, bf16 inference, fp16",
    ),
    (
        "state_bytes negative params",
        lambda: mm.state_bytes(-1, "fp32 adam"),
        ValueError,
        "n_params must be a finite number, zero or more; got -1",
    ),
    (
        "state_bytes NaN params",
        lambda: mm.state_bytes(nan, "fp32 adam"),
        ValueError,
        "n_params must be a finite number, zero or more; got nan",
    ),
    (
        "state_bytes bool params",
        lambda: mm.state_bytes(True, "fp32 adam"),
        ValueError,
        "n_params must be a finite number, zero or more; got True",
    ),
    (
        "state_bytes unknown recipe",
        lambda: mm.state_bytes(10, "bogus"),
        ValueError,
        "unknown recipe 'bogus'; allowed: fp32 inference, bf16 inference, fp16",
    ),
    (
        "state_bytes negative trainable",
        lambda: mm.state_bytes(10, "fp32 adam", n_trainable=-1),
        ValueError,
        "n_trainable must be a finite number, zero or more; got -1",
    ),
    (
        "state_bytes trainable above params",
        lambda: mm.state_bytes(10, "fp32 adam", n_trainable=20),
        ValueError,
        "n_trainable (20) cannot exceed n_params (10)",
    ),
    (
        "estimate_transformer_training negative params",
        lambda: mm.estimate_transformer_training(-1),
        ValueError,
        "sizes must be positive integers; got {'n_params': -1}",
    ),
    (
        "estimate_transformer_training batch 0",
        lambda: mm.estimate_transformer_training(1000, batch=0),
        ValueError,
        "sizes must be positive integers; got {'batch': 0}",
    ),
    (
        "estimate_transformer_training seq_len 0",
        lambda: mm.estimate_transformer_training(1000, seq_len=0),
        ValueError,
        "sizes must be positive integers; got {'seq_len': 0}",
    ),
    (
        "estimate_transformer_training d_model negative",
        lambda: mm.estimate_transformer_training(1000, d_model=-1),
        ValueError,
        "sizes must be positive integers; got {'d_model': -1}",
    ),
    (
        "estimate_transformer_training layers 0",
        lambda: mm.estimate_transformer_training(1000, n_layers=0),
        ValueError,
        "sizes must be positive integers; got {'n_layers': 0}",
    ),
    (
        "estimate_transformer_training vocab 0",
        lambda: mm.estimate_transformer_training(1000, vocab=0),
        ValueError,
        "sizes must be positive integers; got {'vocab': 0}",
    ),
    (
        "estimate_transformer_training unknown recipe",
        lambda: mm.estimate_transformer_training(1000, recipe="fp64 sgd"),
        ValueError,
        "unknown recipe 'fp64 sgd'; allowed: fp32 inference, bf16 inference,",
    ),
    (
        "fits_on negative bytes",
        lambda: mm.fits_on(-1, 80),
        ValueError,
        "total_bytes must be a finite number, zero or more; got -1",
    ),
    (
        "fits_on zero GiB",
        lambda: mm.fits_on(100, 0),
        ValueError,
        "gpu_gib must be a positive finite number; got 0",
    ),
    (
        "fits_on NaN GiB",
        lambda: mm.fits_on(100, nan),
        ValueError,
        "gpu_gib must be a positive finite number; got nan",
    ),
    (
        "fits_on fraction 0",
        lambda: mm.fits_on(100, 80, usable_fraction=0),
        ValueError,
        "usable_fraction must be a number from above 0 to 1; got 0",
    ),
    (
        "fits_on fraction above 1",
        lambda: mm.fits_on(100, 80, usable_fraction=1.5),
        ValueError,
        "usable_fraction must be a number from above 0 to 1; got 1.5",
    ),
    (
        "fits_on fraction NaN",
        lambda: mm.fits_on(100, 80, usable_fraction=nan),
        ValueError,
        "usable_fraction must be a number from above 0 to 1; got nan",
    ),
    (
        "kv_cache_bytes layers 0",
        lambda: mm.kv_cache_bytes(0, 8, 64, 100),
        ValueError,
        "n_layers must be a positive integer, got 0",
    ),
    (
        "kv_cache_bytes negative heads",
        lambda: mm.kv_cache_bytes(2, -8, 64, 100),
        ValueError,
        "kv_heads must be a positive integer, got -8",
    ),
    (
        "kv_cache_bytes fractional head_dim",
        lambda: mm.kv_cache_bytes(2, 8, 1.5, 100),
        ValueError,
        "head_dim must be a positive integer, got 1.5",
    ),
    (
        "kv_cache_bytes negative tokens",
        lambda: mm.kv_cache_bytes(2, 8, 64, -1),
        ValueError,
        "tokens must be a positive integer, got -1",
    ),
    (
        "kv_cache_bytes batch 0",
        lambda: mm.kv_cache_bytes(2, 8, 64, 100, batch=0),
        ValueError,
        "batch must be a positive integer, got 0",
    ),
    (
        "kv_cache_bytes bytes_per_value 0",
        lambda: mm.kv_cache_bytes(2, 8, 64, 100, bytes_per_value=0),
        ValueError,
        "bytes_per_value must be a positive integer, got 0",
    ),
    # flops
    (
        "matmul_flops negative m",
        lambda: fl.matmul_flops(-1, 2, 3),
        ValueError,
        "m must be a whole number, 1 or more; got -1",
    ),
    (
        "matmul_flops fractional k",
        lambda: fl.matmul_flops(2, 2, 1.5),
        ValueError,
        "k must be a whole number, 1 or more; got 1.5",
    ),
    (
        "matmul_flops NaN n",
        lambda: fl.matmul_flops(2, nan, 3),
        ValueError,
        "n must be a whole number, 1 or more; got nan",
    ),
    (
        "matmul_flops bool m",
        lambda: fl.matmul_flops(True, 2, 3),
        ValueError,
        "m must be a whole number, 1 or more; got True",
    ),
    (
        "matmul_flops batch 0",
        lambda: fl.matmul_flops(2, 2, 3, batch=0),
        ValueError,
        "batch must be a whole number, 1 or more; got 0",
    ),
    (
        "attention flops negative layers",
        lambda: fl.attention_training_flops_per_token(-1, 128, 64),
        ValueError,
        "n_layers must be a positive integer, got -1",
    ),
    (
        "attention flops context 0",
        lambda: fl.attention_training_flops_per_token(2, 0, 64),
        ValueError,
        "context must be a positive integer, got 0",
    ),
    (
        "attention flops d_model NaN",
        lambda: fl.attention_training_flops_per_token(2, 128, nan),
        ValueError,
        "d_model must be a positive integer, got nan",
    ),
    (
        "arithmetic_intensity zero bytes",
        lambda: fl.arithmetic_intensity(1, 0),
        ValueError,
        "bytes_moved must be a positive finite number; got 0",
    ),
    (
        "arithmetic_intensity negative flops",
        lambda: fl.arithmetic_intensity(-1, 10),
        ValueError,
        "flops must be a finite number, zero or more; got -1",
    ),
    (
        "arithmetic_intensity NaN flops",
        lambda: fl.arithmetic_intensity(nan, 1),
        ValueError,
        "flops must be a finite number, zero or more; got nan",
    ),
    (
        "arithmetic_intensity infinite bytes",
        lambda: fl.arithmetic_intensity(1, inf),
        ValueError,
        "bytes_moved must be a positive finite number; got inf",
    ),
    (
        "count_flops not callable",
        lambda: fl.count_flops("model", torch.ones(2)),
        TypeError,
        "fn_or_module must be a function or a model to call, got str 'model'",
    ),
    (
        "count_memory_traffic not callable",
        lambda: fl.count_memory_traffic(3),
        TypeError,
        "count_memory_traffic() needs a module or a callable, got int",
    ),
    # timing
    (
        "throughput zero seconds",
        lambda: tm.throughput(10, 0),
        ValueError,
        "seconds must be a positive finite number; got 0",
    ),
    (
        "throughput negative items",
        lambda: tm.throughput(-1, 1),
        ValueError,
        "items must be a finite number, zero or more; got -1",
    ),
    (
        "throughput NaN seconds",
        lambda: tm.throughput(10, nan),
        ValueError,
        "seconds must be a positive finite number; got nan",
    ),
    (
        "throughput negative seconds",
        lambda: tm.throughput(10, -1),
        ValueError,
        "seconds must be a positive finite number; got -1",
    ),
    (
        "throughput infinite items",
        lambda: tm.throughput(inf, 1),
        ValueError,
        "items must be a finite number, zero or more; got inf",
    ),
    (
        "measure not callable",
        lambda: tm.measure("fn"),
        TypeError,
        "measure() needs a callable as its first argument, got str",
    ),
    (
        "measure negative warmup",
        lambda: tm.measure(f, warmup=-1),
        ValueError,
        "warmup must be a whole number, 0 or more; got -1",
    ),
    (
        "measure zero min_run_s",
        lambda: tm.measure(f, min_run_s=0),
        ValueError,
        "min_run_s must be a positive finite number; got 0",
    ),
    (
        "measure NaN min_run_s",
        lambda: tm.measure(f, min_run_s=nan),
        ValueError,
        "min_run_s must be a positive finite number; got nan",
    ),
    (
        "measure max_run_s below min_run_s",
        lambda: tm.measure(f, min_run_s=0.2, max_run_s=0.1),
        ValueError,
        "max_run_s (0.1 s) must be at least min_run_s (0.2 s)",
    ),
    (
        "time_once not callable",
        lambda: tm.time_once(42),
        TypeError,
        "fn must be a function or a model to call, got int 42",
    ),
    (
        "summarize empty",
        lambda: tm.summarize([]),
        ValueError,
        "times_s is empty; summarize needs one timing or more",
    ),
    (
        "summarize negative time",
        lambda: tm.summarize([0.1, -1.0]),
        ValueError,
        "times_s must hold durations, zero or more; the smallest is -1.0",
    ),
    (
        "summarize NaN time",
        lambda: tm.summarize([0.1, nan]),
        ValueError,
        "times_s must hold finite numbers; times_s[1] is nan",
    ),
    (
        "format_seconds NaN",
        lambda: tm.format_seconds(nan),
        ValueError,
        "seconds must be a finite number, zero or more; got nan",
    ),
    (
        "format_seconds negative",
        lambda: tm.format_seconds(-1.0),
        ValueError,
        "seconds must be a finite number, zero or more; got -1.0",
    ),
    (
        "idle_cores zero seconds",
        lambda: tm.idle_cores(seconds=0),
        ValueError,
        "seconds must be positive and settle_s not negative, got 0 and 0.2",
    ),
    (
        "idle_cores negative settle",
        lambda: tm.idle_cores(settle_s=-1),
        ValueError,
        "seconds must be positive and settle_s not negative, got 0.2 and -1",
    ),
    (
        "idle_cores NaN assume",
        lambda: tm.idle_cores(assume=nan),
        ValueError,
        "assume must be a finite number, zero or more; got nan",
    ),
    # memory measurement
    (
        "ensure_fits negative bytes",
        lambda: me.ensure_fits(-1, "cpu"),
        ValueError,
        "required_bytes must be a finite number, zero or more; got -1",
    ),
    (
        "ensure_fits NaN bytes",
        lambda: me.ensure_fits(nan, "cpu"),
        ValueError,
        "required_bytes must be a finite number, zero or more; got nan",
    ),
    (
        "ensure_fits negative budget",
        lambda: me.ensure_fits(10, "cpu", budget_bytes=-1),
        ValueError,
        "budget_bytes must be a finite number, zero or more; got -1",
    ),
    (
        "ensure_fits unknown device",
        lambda: me.ensure_fits(10, "tpu"),
        ValueError,
        "device must be a device name such as 'cpu' or 'cuda:0', got 'tpu'",
    ),
    (
        "peak_memory not callable",
        lambda: me.peak_memory("fn"),
        TypeError,
        "peak_memory() needs a callable, got str",
    ),
    (
        "serialized_bytes not a module",
        lambda: me.serialized_bytes("model"),
        TypeError,
        "model must be a torch.nn.Module, got str",
    ),
    # ceilings
    (
        "matmul ceiling n 0",
        lambda: ce.measure_matmul_ceiling("cpu", n=0),
        ValueError,
        "n must be a whole number, 1 or more; got 0",
    ),
    (
        "matmul ceiling negative n",
        lambda: ce.measure_matmul_ceiling("cpu", n=-4),
        ValueError,
        "n must be a whole number, 1 or more; got -4",
    ),
    (
        "matmul ceiling zero min_run_s",
        lambda: ce.measure_matmul_ceiling("cpu", n=64, min_run_s=0),
        ValueError,
        "min_run_s must be a positive finite number; got 0",
    ),
    (
        "copy bandwidth mib 0",
        lambda: ce.measure_copy_bandwidth("cpu", mib=0),
        ValueError,
        "mib must be a whole number, 1 or more; got 0",
    ),
    (
        "copy bandwidth fractional mib",
        lambda: ce.measure_copy_bandwidth("cpu", mib=0.5),
        ValueError,
        "mib must be a whole number, 1 or more; got 0.5",
    ),
    (
        "datasheet peak int8",
        lambda: ce.datasheet_peak_flops("cpu", torch.int8, device_name="NVIDIA H200"),
        ValueError,
        "no datasheet peak for torch.int8; allowed: torch.float32,",
    ),
    (
        "datasheet name not a string",
        lambda: ce.datasheet_for(7),
        TypeError,
        "device_name must be a string (a GPU's reported name), got int",
    ),
    (
        "roofline unknown device",
        lambda: ce.measure_roofline("tpu"),
        ValueError,
        "device must be a device such as 'cpu', 'cuda:0' or 'mps', got 'tpu'",
    ),
    # models
    (
        "build_model unknown family",
        lambda: mo.build_model("rnn"),
        ValueError,
        "unknown model family 'rnn'; allowed: mlp, cnn, gpt",
    ),
    (
        "build_model unknown size",
        lambda: mo.build_model("mlp", "xxl"),
        ValueError,
        "unknown size 'xxl' for mlp; allowed: xs, s, m, l",
    ),
    (
        "build_model unknown override",
        lambda: mo.build_model("mlp", "s", widht=3),
        TypeError,
        "MLP.__init__() got an unexpected keyword argument 'widht'",
    ),
    (
        "torchvision_model unknown",
        lambda: mo.torchvision_model("resnet9000"),
        ValueError,
        "unknown torchvision model 'resnet9000'; suggested: resnet18,",
    ),
    (
        "torchvision_model classes 0",
        lambda: mo.torchvision_model("resnet18", num_classes=0),
        ValueError,
        "num_classes must be a whole number, 1 or more; got 0",
    ),
    (
        "count_parameters not a module",
        lambda: mo.count_parameters("model"),
        TypeError,
        "model must be a torch.nn.Module, got str",
    ),
    (
        "mlp_forward_flops no widths",
        lambda: mo.mlp_forward_flops([], 4),
        ValueError,
        "widths must list two or more layer widths [d_in, ..., out], got []",
    ),
    (
        "mlp_forward_flops one width",
        lambda: mo.mlp_forward_flops([10], 4),
        ValueError,
        "widths must list two or more layer widths [d_in, ..., out], got [10]",
    ),
    (
        "mlp_forward_flops negative width",
        lambda: mo.mlp_forward_flops([10, -1], 4),
        ValueError,
        "widths[1] must be a whole number, 1 or more; got -1",
    ),
    (
        "mlp_forward_flops batch 0",
        lambda: mo.mlp_forward_flops([10, 4], 0),
        ValueError,
        "batch must be a whole number, 1 or more; got 0",
    ),
    (
        "mlp_training_flops negative batch",
        lambda: mo.mlp_training_flops([10, 4], -2),
        ValueError,
        "batch must be a whole number, 1 or more; got -2",
    ),
    (
        "mlp_training_flops fractional width",
        lambda: mo.mlp_training_flops([10, 4.5], 2),
        ValueError,
        "widths[1] must be a whole number, 1 or more; got 4.5",
    ),
    (
        "add_lora rank 0",
        lambda: mo.add_lora(mlp(), rank=0),
        ValueError,
        "rank must be a positive integer, got 0",
    ),
    (
        "add_lora NaN alpha",
        lambda: mo.add_lora(mlp(), alpha=nan),
        ValueError,
        "alpha must be a finite number; got nan",
    ),
    (
        "add_lora not a module",
        lambda: mo.add_lora("model"),
        TypeError,
        "model must be a torch.nn.Module, got str",
    ),
    (
        "lora_training_flops rank 0",
        lambda: mo.lora_training_flops([10, 4], 2, 0),
        ValueError,
        "rank must be a whole number, 1 or more; got 0",
    ),
    # data
    (
        "teacher_classification n 0",
        lambda: da.teacher_classification(0, 4, 2),
        ValueError,
        "n must be a whole number, 1 or more; got 0",
    ),
    (
        "teacher_classification d_in 0",
        lambda: da.teacher_classification(10, 0, 2),
        ValueError,
        "d_in must be a whole number, 1 or more; got 0",
    ),
    (
        "teacher_classification one class",
        lambda: da.teacher_classification(10, 4, 1),
        ValueError,
        "need n >= 1, d_in >= 1 and classes >= 2; got n=10, d_in=4, classes=1",
    ),
    (
        "teacher_classification fractional n",
        lambda: da.teacher_classification(10.5, 4, 2),
        ValueError,
        "n must be a whole number, 1 or more; got 10.5",
    ),
    (
        "grating_images n 0",
        lambda: da.grating_images(0),
        ValueError,
        "n must be a whole number, 1 or more; got 0",
    ),
    (
        "grating_images size 0",
        lambda: da.grating_images(4, size=0),
        ValueError,
        "need size >= 4 and classes >= 2; got size=0, classes=4",
    ),
    (
        "grating_images classes 0",
        lambda: da.grating_images(4, classes=0),
        ValueError,
        "need size >= 4 and classes >= 2; got size=32, classes=0",
    ),
    (
        "grating_images negative noise",
        lambda: da.grating_images(4, noise=-1),
        ValueError,
        "noise must be a finite number, zero or more; got -1",
    ),
    (
        "counting_tokens n 0",
        lambda: da.counting_tokens(0, 5),
        ValueError,
        "n must be a whole number, 1 or more; got 0",
    ),
    (
        "counting_tokens seq_len 0",
        lambda: da.counting_tokens(2, 0),
        ValueError,
        "need seq_len >= 2 and vocab >= 4; got seq_len=0, vocab=256",
    ),
    (
        "counting_tokens vocab 1",
        lambda: da.counting_tokens(2, 5, vocab=1),
        ValueError,
        "need seq_len >= 2 and vocab >= 4; got seq_len=5, vocab=1",
    ),
    (
        "meeting_audio negative seconds",
        lambda: da.meeting_audio(-1),
        ValueError,
        "seconds must be a positive finite number; got -1",
    ),
    (
        "meeting_audio NaN seconds",
        lambda: da.meeting_audio(nan),
        ValueError,
        "seconds must be a positive finite number; got nan",
    ),
    (
        "meeting_audio sample rate 0",
        lambda: da.meeting_audio(1, sample_rate=0),
        ValueError,
        "sample_rate must be a whole number, 1 or more; got 0",
    ),
    (
        "jpeg_gratings quality 0",
        lambda: da.jpeg_gratings(2, quality=0),
        ValueError,
        "quality must be between 1 and 100, got 0",
    ),
    (
        "jpeg_gratings quality 101",
        lambda: da.jpeg_gratings(2, quality=101),
        ValueError,
        "quality must be between 1 and 100, got 101",
    ),
    (
        "jpeg_gratings n 0",
        lambda: da.jpeg_gratings(0),
        ValueError,
        "n must be a whole number, 1 or more; got 0",
    ),
    # diffusion
    (
        "latent_tokens side 0",
        lambda: di.latent_tokens(0, 2),
        ValueError,
        "a latent side must be a positive multiple of the patch side 2, got 0",
    ),
    (
        "latent_tokens side not divisible by patch",
        lambda: di.latent_tokens(10, 3),
        ValueError,
        "a latent side must be a positive multiple of the patch side 3, got 10",
    ),
    (
        "latent_tokens frames 0",
        lambda: di.latent_tokens(8, 2, frames=0),
        ValueError,
        "frames must be a positive integer, got 0",
    ),
    (
        "latent_side not divisible",
        lambda: di.latent_side(100, 8),
        ValueError,
        "an image side must be a positive multiple of the autoencoder's factor",
    ),
    (
        "latent_side 0",
        lambda: di.latent_side(0),
        ValueError,
        "an image side must be a positive multiple of the autoencoder's factor",
    ),
    (
        "latent_side factor 0",
        lambda: di.latent_side(64, 0),
        ValueError,
        "factor must be a whole number, 1 or more; got 0",
    ),
    (
        "ddim_timesteps 0",
        lambda: di.ddim_timesteps(0),
        ValueError,
        "steps must be an integer from 1 to 1000 (the training schedule's),",
    ),
    (
        "ddim_timesteps above training steps",
        lambda: di.ddim_timesteps(2000),
        ValueError,
        "steps must be an integer from 1 to 1000 (the training schedule's),",
    ),
    (
        "ddim_timesteps fractional",
        lambda: di.ddim_timesteps(1.5),
        ValueError,
        "steps must be an integer from 1 to 1000 (the training schedule's),",
    ),
    (
        "alphas_cumprod 0 steps",
        lambda: di.alphas_cumprod(0),
        ValueError,
        "train_steps must be a whole number, 1 or more; got 0",
    ),
    (
        "timestep_embedding odd dim",
        lambda: di.timestep_embedding(torch.tensor([1.0]), dim=7),
        ValueError,
        "dim must be even (half sines, half cosines), got 7",
    ),
    # checkpoint
    (
        "checkpoint_name negative step",
        lambda: ck.checkpoint_name(-1),
        ValueError,
        "step must be a whole number, 0 or more; got -1",
    ),
    (
        "checkpoint_name fractional step",
        lambda: ck.checkpoint_name(1.5),
        ValueError,
        "step must be a whole number, 0 or more; got 1.5",
    ),
    (
        "write_file negative bytes",
        lambda: ck.write_file("/tmp/x-never", -1),
        ValueError,
        "nbytes must be a positive integer, got -1",
    ),
    (
        "async_speedup negative save",
        lambda: ck.async_speedup(-1, 0.1, 1.0, 1.0),
        ValueError,
        "save_s must be a finite number, zero or more; got -1",
    ),
    (
        "async_speedup NaN train",
        lambda: ck.async_speedup(1, 0.1, nan, 1.0),
        ValueError,
        "train_s must be a finite number, zero or more; got nan",
    ),
    (
        "run_trainer steps 0",
        lambda: ck.run_trainer("/tmp/never-x", 0, 10),
        ValueError,
        "steps must be a positive integer, got 0",
    ),
    (
        "run_trainer every 0",
        lambda: ck.run_trainer("/tmp/never-x", 10, 0),
        ValueError,
        "every must be a positive integer, got 0",
    ),
    (
        "run_trainer kill_after beyond steps",
        lambda: ck.run_trainer("/tmp/never-x", 10, 5, kill_after=20),
        ValueError,
        "kill_after must be a step from 0 to 9, got 20",
    ),
    (
        "load missing checkpoint",
        lambda: ck.load("/nonexistent-labkit/step-000001.pt", mlp()),
        CheckpointError,
        "no checkpoint at",
    ),
    # estimate and fits
    (
        "fit_job one point",
        lambda: est.fit_job([1], [1]),
        ValueError,
        "probe at least three different sizes: two always fit a line exactly,",
    ),
    (
        "fit_job lengths differ",
        lambda: est.fit_job([1, 2, 3], [1, 2]),
        ValueError,
        "xs and ys must be 1-D and the same length, got (3,) and (2,)",
    ),
    (
        "fit_job NaN second",
        lambda: est.fit_job([1, 2, 3], [1, nan, 3]),
        ValueError,
        "sizes and seconds must be positive finite numbers",
    ),
    (
        "fit_job negative size",
        lambda: est.fit_job([-1, 2, 3], [1, 2, 3]),
        ValueError,
        "sizes and seconds must be positive finite numbers",
    ),
    (
        "split_one_off empty",
        lambda: est.split_one_off([]),
        ValueError,
        "need more than warm=3 steps to separate the one-off cost, got 0",
    ),
    (
        "split_one_off negative warm",
        lambda: est.split_one_off([1, 2, 3, 4], warm=-1),
        ValueError,
        "warm must be a whole number of steps, 0 or more; got -1",
    ),
    (
        "training_time negative flops",
        lambda: est.training_time_from_flops(-1, 10, 1e12),
        ValueError,
        "flops_per_step must be positive, got -1",
    ),
    (
        "training_time steps 0",
        lambda: est.training_time_from_flops(1e9, 0, 1e12),
        ValueError,
        "steps must be positive, got 0",
    ),
    (
        "training_time peak 0",
        lambda: est.training_time_from_flops(1e9, 10, 0),
        ValueError,
        "peak_flops must be positive, got 0",
    ),
    (
        "training_time utilisation 0",
        lambda: est.training_time_from_flops(1e9, 10, 1e12, utilisation=0),
        ValueError,
        "utilisation must be in (0, 1], got 0",
    ),
    (
        "training_time utilisation above 1",
        lambda: est.training_time_from_flops(1e9, 10, 1e12, utilisation=1.5),
        ValueError,
        "utilisation must be in (0, 1], got 1.5",
    ),
    (
        "training_time devices 0",
        lambda: est.training_time_from_flops(1e9, 10, 1e12, devices=0),
        ValueError,
        "devices must be positive, got 0",
    ),
    (
        "fit_power_law zero x",
        lambda: sc.fit_power_law([0, 1, 2], [1, 2, 3]),
        ValueError,
        "a power-law fit needs positive, finite sizes and values (it works on",
    ),
    (
        "fit_power_law negative y",
        lambda: sc.fit_power_law([1, 2, 3], [-1, 2, 3]),
        ValueError,
        "a power-law fit needs positive, finite sizes and values (it works on",
    ),
    (
        "fit_power_law lengths differ",
        lambda: sc.fit_power_law([1, 2, 3], [1, 2]),
        ValueError,
        "xs and ys must be 1-D and the same length, got (3,) and (2,)",
    ),
    (
        "fit_power_law one point",
        lambda: sc.fit_power_law([1], [1]),
        ValueError,
        "a power-law fit needs at least two different sizes",
    ),
    (
        "fit_linear one point",
        lambda: sc.fit_linear([1], [1]),
        ValueError,
        "a linear fit needs at least two different sizes",
    ),
    (
        "fit_linear NaN",
        lambda: sc.fit_linear([1, 2, 3], [1, nan, 3]),
        ValueError,
        "xs and ys must hold finite numbers (a NaN or an infinity spoils the",
    ),
    (
        "fit_linear all x equal",
        lambda: sc.fit_linear([2, 2, 2], [1, 2, 3]),
        ValueError,
        "a linear fit needs at least two different sizes",
    ),
    # communication
    (
        "fit_link one rank",
        lambda: cm.fit_link([1e3, 1e6], [1e-4, 1e-3], n_ranks=1),
        ValueError,
        "a link can only be calibrated from an all-reduce over at least 2",
    ),
    (
        "fit_link negative size",
        lambda: cm.fit_link([-1e3, 1e6], [1e-4, 1e-3], n_ranks=2),
        ValueError,
        "sizes_bytes must hold finite numbers above zero; sizes_bytes[0] is",
    ),
    (
        "fit_link lengths differ",
        lambda: cm.fit_link([1e3, 1e6, 1e7], [1e-4, 1e-3], n_ranks=2),
        ValueError,
        "xs and ys must be 1-D and the same length, got (3,) and (2,)",
    ),
    (
        "predict_data_parallel 0 gpus",
        lambda: cm.predict_data_parallel(0, 1.0, 1e6, link()),
        ValueError,
        "n_gpus must be a whole number, 1 or more; got 0",
    ),
    (
        "predict_data_parallel negative compute",
        lambda: cm.predict_data_parallel(2, -1.0, 1e6, link()),
        ValueError,
        "compute_s must be a positive finite number; got -1.0",
    ),
    (
        "predict_data_parallel overlap 2",
        lambda: cm.predict_data_parallel(2, 1.0, 1e6, link(), overlap=2),
        ValueError,
        "overlap must be between 0 and 1, got 2",
    ),
    (
        "predict_data_parallel unknown scaling",
        lambda: cm.predict_data_parallel(2, 1.0, 1e6, link(), scaling="medium"),
        ValueError,
        "scaling must be 'strong' or 'weak', got 'medium'",
    ),
    # serving
    (
        "DynamicBatcher max_batch 0",
        lambda: ba.DynamicBatcher(f, max_batch=0),
        ValueError,
        "max_batch must be a positive integer, got 0",
    ),
    (
        "DynamicBatcher negative wait",
        lambda: ba.DynamicBatcher(f, max_wait_ms=-1),
        ValueError,
        "max_wait_ms must be zero or a positive number of milliseconds, got -1",
    ),
    (
        "DynamicBatcher NaN wait",
        lambda: ba.DynamicBatcher(f, max_wait_ms=nan),
        ValueError,
        "max_wait_ms must be zero or a positive number of milliseconds, got",
    ),
    (
        "DynamicBatcher model not callable",
        lambda: ba.DynamicBatcher("model"),
        TypeError,
        "model_fn must be a model or a function to call, got str",
    ),
    (
        "poisson NaN rate",
        lambda: lo.poisson(ba.DynamicBatcher(f), lambda i: torch.ones(2), rate=nan, n=5),
        ValueError,
        "rate must be a positive number of requests per second, got nan",
    ),
    (
        "poisson n 0",
        lambda: lo.poisson(ba.DynamicBatcher(f), lambda i: torch.ones(2), rate=10, n=0),
        ValueError,
        "the number of requests must be a positive integer, got 0",
    ),
    (
        "single_stream n 0",
        lambda: lo.single_stream(ba.DynamicBatcher(f), lambda i: torch.ones(2), 0),
        ValueError,
        "the number of requests must be a positive integer, got 0",
    ),
    (
        "find_max_rate negative bound",
        lambda: lo.find_max_rate(ba.DynamicBatcher(f), lambda i: torch.ones(2), -1, 1, 10),
        ValueError,
        "p99_bound_ms must be a positive finite number; got -1",
    ),
    (
        "find_max_rate low above high",
        lambda: lo.find_max_rate(ba.DynamicBatcher(f), lambda i: torch.ones(2), 10, 100, 10),
        ValueError,
        "need 0 < low < high, got low=100, high=10",
    ),
    # the harness
    (
        "check NaN context",
        lambda: ex.check("inference_vs_training.3", 1.0, step_s=nan, batch=64),
        ValueError,
        "inference_vs_training.3: step_s is nan, not a finite number",
    ),
    (
        "check infinite context",
        lambda: ex.check("input_size.3", 1.0, n_items=10, per_item_ms=inf),
        ValueError,
        "input_size.3: per_item_ms is inf, not a finite number",
    ),
    (
        "check missing context",
        lambda: ex.check("input_size.3", 1.0, n_items=10),
        TypeError,
        "input_size.3 needs per_item_ms from the notebook",
    ),
    (
        "check unknown context",
        lambda: ex.check("input_size.3", 1.0, n_items=10, per_item_ms=1.0, batch=3),
        TypeError,
        "input_size.3 takes n_items, per_item_ms from the notebook; batch is not one of them",
    ),
    (
        "check unknown exercise",
        lambda: ex.check("no_such_exercise", 1),
        ValueError,
        "no exercise 'no_such_exercise' in the answer key; known:",
    ),
    (
        "check_prediction unknown exercise",
        lambda: ex.check_prediction("no_such_exercise", 1.0),
        ValueError,
        "no prediction exercise 'no_such_exercise'; known: start_here.4,",
    ),
    (
        "settings unknown notebook",
        lambda: sz.settings("no_such_notebook", "quick"),
        KeyError,
        "\"no notebook called 'no_such_notebook'; the notebooks are:",
    ),
    (
        "settings unresolved profile",
        lambda: sz.settings("start_here", "auto"),
        ValueError,
        "profile must be resolved to 'quick' or 'full' first, got 'auto'",
    ),
    (
        "resolve_profile unknown",
        lambda: sz.resolve_profile("fast"),
        ValueError,
        "unknown profile 'fast'; allowed: quick, full, auto",
    ),
    (
        "choose_device unknown",
        lambda: dv.choose_device("tpu"),
        ValueError,
        "unknown device 'tpu'; allowed: auto, cpu, cuda, cuda:N, mps",
    ),
    (
        "choose_device missing GPU",
        lambda: dv.choose_device("cuda:9"),
        ValueError,
        "device 'cuda:9' was requested but this PyTorch sees no CUDA GPU;",
    ),
    (
        "start unknown notebook",
        lambda: labkit.start("no_such_notebook", show=False),
        KeyError,
        "\"no notebook called 'no_such_notebook'; the notebooks are:",
    ),
    (
        "start zero threads",
        lambda: labkit.start("start_here", threads=0, show=False),
        ValueError,
        "threads must be a whole number, 1 or more; got 0",
    ),
]


@pytest.mark.parametrize(("call", "error", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_bad_input_gets_a_clear_error(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_the_table_is_large_and_each_case_is_distinct():
    assert len(CASES) >= 150
    assert len({c[0] for c in CASES}) == len(CASES)
