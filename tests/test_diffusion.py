"""labkit.workloads.diffusion: the DiT against its paper, its FLOPs against the counter, DDIM against diffusers."""

import pytest
import torch

import labkit
from labkit.workloads import diffusion


def meta_dit(cfg: diffusion.DiTConfig) -> diffusion.DiT:
    with torch.device("meta"):
        return diffusion.DiT(cfg)


def meta_inputs(side: int, frames: int = 1, batch: int = 1):
    shape = (batch, 4, side, side) if frames == 1 else (batch, 4, frames, side, side)
    labels = torch.zeros(batch, dtype=torch.long, device="meta")
    return torch.empty(shape, device="meta"), labels, labels


def test_dit_xl_2_has_the_papers_parameters_and_multiply_adds():
    # Peebles & Xie (2023), Table 4: DiT-XL/2 675 M parameters, 118.64 Gflops at 256x256 (32x32 latent); §5.1:
    # 524.6 Gflops at 512x512. Their "flops" are multiply-adds: the counter's FLOPs are twice those, to 0.05%.
    model = meta_dit(diffusion.DIT_XL_2)
    assert labkit.count_parameters(model) == 674_834_720
    for side, paper_gmacs in ((32, 118.64), (64, 524.6)):
        counted = labkit.count_flops(model, *meta_inputs(side))
        assert counted / 2e9 == pytest.approx(paper_gmacs, rel=5e-4)


@pytest.mark.parametrize(
    "cfg, side, frames, batch",
    [
        (diffusion.DIT_XL_2, 32, 1, 1),
        (diffusion.DiTConfig(), 16, 1, 2),
        (diffusion.DiTConfig(), 8, 6, 3),
        (diffusion.DiTConfig(width=96, depth=3, heads=3, patch=4, learn_sigma=False), 16, 2, 1),
    ],
)
def test_pass_flops_equal_the_counter_exactly(cfg, side, frames, batch):
    counted = labkit.count_flops(meta_dit(cfg), *meta_inputs(side, frames, batch))
    assert sum(diffusion.pass_flops(cfg, side, frames, batch).values()) == counted


def test_the_attention_term_is_quadratic_and_the_rest_linear_in_tokens():
    cfg = diffusion.DiTConfig()
    small, large = diffusion.pass_flops(cfg, 16), diffusion.pass_flops(cfg, 32)  # 64 and 256 tokens
    assert large["attention"] == 16 * small["attention"]
    assert large["linear"] == 4 * small["linear"]
    assert large["conditioning"] == small["conditioning"]
    # A video is frames x the tokens: 4 frames of 16x16 cost what one 32x32 image costs.
    assert diffusion.pass_flops(cfg, 16, frames=4) == large


def test_a_video_latent_is_denoised_as_one_sequence_and_keeps_its_shape():
    torch.manual_seed(0)
    model = diffusion.DiT(diffusion.DiTConfig(width=32, depth=1, heads=2)).eval()
    video = torch.randn(2, 4, 3, 8, 8)
    t, y = torch.tensor([10, 500]), torch.tensor([1, model.null_label])
    changed = video.clone()
    changed[:, :, 2] += 1.0  # the last frame only
    with torch.no_grad():
        out, out_changed = model(video, t, y), model(changed, t, y)
    assert out.shape == (2, 8, 3, 8, 8)
    # Full spatio-temporal attention: changing the last frame changes what is predicted for the first.
    assert not torch.allclose(out[:, :, 0], out_changed[:, :, 0])


def test_bad_input_is_a_clear_error():
    model = diffusion.DiT(diffusion.DiTConfig(width=32, depth=1, heads=2))
    with pytest.raises(ValueError, match="multiples of the patch side 2"):
        model(torch.randn(1, 4, 15, 15), torch.tensor([0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="latent channels"):
        model(torch.randn(1, 3, 16, 16), torch.tensor([0]), torch.tensor([0]))
    with pytest.raises(ValueError, match=r"\(B, C, H, W\)"):
        model(torch.randn(4, 16, 16), torch.tensor([0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="multiple of heads"):
        diffusion.DiTConfig(width=30, heads=4)
    with pytest.raises(ValueError, match="positive integer"):
        diffusion.DiTConfig(depth=0)
    with pytest.raises(ValueError, match="multiple of the autoencoder's factor 8"):
        diffusion.latent_side(500)
    assert diffusion.latent_side(512) == 64
    for bad in (0, -4, 2.5, True, 1001):
        with pytest.raises(ValueError, match="steps must be an integer from 1 to 1000"):
            diffusion.ddim_timesteps(bad)
    with pytest.raises(ValueError, match="positive multiple of the patch side"):
        diffusion.latent_tokens(15, 2)


def test_ddim_matches_diffusers_scheduler():
    import diffusers  # a test dependency (pyproject's test extra), the reference implementation

    for steps in (4, 25, 50):
        reference = diffusers.DDIMScheduler(
            num_train_timesteps=1000, beta_start=1e-4, beta_end=0.02, beta_schedule="linear",
            clip_sample=False, set_alpha_to_one=True, steps_offset=0, timestep_spacing="leading",
        )  # fmt: skip
        reference.set_timesteps(steps)
        assert diffusion.ddim_timesteps(steps) == reference.timesteps.tolist()
        torch.manual_seed(steps)
        x_ours = x_ref = torch.randn(1, 4, 8, 8, dtype=torch.float64)
        for t in diffusion.ddim_timesteps(steps):
            eps = torch.randn_like(x_ours) * 0.5 + 0.1 * x_ours  # any noise prediction will do
            x_ours = diffusion.ddim_step(x_ours, eps, t, steps)
            x_ref = reference.step(eps, t, x_ref, eta=0.0).prev_sample
            # diffusers keeps ᾱ in float32, labkit in float64: they agree to float32's precision.
            torch.testing.assert_close(x_ours, x_ref, rtol=1e-5, atol=1e-5)


def test_the_decoder_upsamples_eight_times_and_its_flops_follow_pixels():
    decoder = diffusion.LatentDecoder()
    assert decoder.factor == 8
    assert decoder(torch.randn(1, 4, 4, 6)).shape == (1, 3, 32, 48)
    small = labkit.count_flops(decoder, torch.randn(1, 4, 8, 8))
    assert labkit.count_flops(decoder, torch.randn(1, 4, 16, 16)) == 4 * small
    with pytest.raises(ValueError, match="multiples of groups"):
        diffusion.LatentDecoder(widths=(64, 30))


def test_both_profiles_pair_each_image_with_a_video_of_the_same_tokens():
    from labkit.lab.sizes import SIZES

    for profile, sizes in SIZES["generating_images"].items():
        for side in sizes.image_sides:
            assert (side // sizes.frame_side) ** 2 in sizes.frames, (profile, side)
        diffusion.DiTConfig(width=sizes.width, depth=sizes.depth, heads=sizes.heads)
        diffusion.LatentDecoder(sizes.decoder_widths)
