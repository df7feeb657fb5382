"""Our VP8 and H.264 encoders: aiortc's, VP8's denoiser off and H.264 at a real-time preset,
reopened exactly when aiortc would reopen them, within the bitrate limits and capped by frame
size."""

from __future__ import annotations

import av
from aiortc import rtcrtpsender
from aiortc.codecs import get_encoder
from aiortc.codecs.h264 import h264_depayload
from aiortc.codecs.vpx import vp8_depayload
from aiortc.rtcrtpparameters import RTCRtpCodecParameters

from streaming.rtc import encoder as encoder_module
from streaming.rtc.encoder import BitrateLimits, H264Encoder, Vp8Encoder, bitrate_cap, install
from tests.support.media import video_frames


def test_it_encodes_without_the_denoiser_and_reopens_on_a_bitrate_change_or_new_size(
    monkeypatch,
):
    opened, options = [], []  # every codec our encoder opened, and its options (PyAV clears
    original = encoder_module._open_vp8  # them once libvpx has taken them)

    def recording_open(*args):
        codec = original(*args)
        opened.append(codec)
        options.append(dict(codec.options))
        return codec

    monkeypatch.setattr(encoder_module, "_open_vp8", recording_open)
    encoder = Vp8Encoder()
    decoder = av.CodecContext.create("libvpx", "r")
    for i, frame in enumerate(video_frames(12) + video_frames(3, size=(256, 192))):
        if i == 6:
            encoder.target_bitrate = 250_000  # a REMB change of half: aiortc reopens
        payloads, _ = encoder.encode(frame, force_keyframe=i == 9)
        assert encoder.codec is opened[-1]  # aiortc's encode kept the codec ours opened
        assert encoder.codec.bit_rate == encoder.target_bitrate
        data = b"".join(vp8_depayload(p) for p in payloads)
        assert decoder.decode(av.Packet(data))[0].width == frame.width
        key_frame = data[0] & 1 == 0  # the frame tag's first bit (RFC 6386 §9.1)
        assert key_frame == (i in (0, 6, 9, 12)), i  # first, reopened, PLI, new size
    assert len(opened) == 3  # first frame, bitrate change, new size; a PLI reopens nothing
    assert all(o["noise-sensitivity"] == "0" and o["cpu-used"] == "-6" for o in options)


def test_a_small_bitrate_change_keeps_the_encoder():
    encoder = Vp8Encoder()
    first, second = video_frames(2)
    encoder.encode(first)
    codec = encoder.codec
    encoder.target_bitrate = int(encoder.target_bitrate * 1.05)
    encoder.encode(second)
    assert encoder.codec is codec


def test_install_makes_aiortc_senders_build_ours_for_video_and_aiortcs_for_audio():
    install()
    install(limits=BitrateLimits(400_000, 300_000, 600_000))  # idempotent; new limits
    vp8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)
    h264 = RTCRtpCodecParameters(mimeType="video/H264", clockRate=90000, payloadType=102)
    opus = RTCRtpCodecParameters(mimeType="audio/opus", clockRate=48000, payloadType=111)
    assert isinstance(rtcrtpsender.get_encoder(vp8), Vp8Encoder)
    built = rtcrtpsender.get_encoder(h264)
    assert isinstance(built, H264Encoder) and built.target_bitrate == 400_000
    assert type(rtcrtpsender.get_encoder(opus)) is type(get_encoder(opus))
    install()


def test_h264_opens_libx264_at_a_real_time_preset_and_decodes(monkeypatch):
    options = []
    original = encoder_module._open_h264

    def recording_open(*args):
        codec = original(*args)
        options.append(dict(codec.options))
        return codec

    monkeypatch.setattr(encoder_module, "_open_h264", recording_open)
    encoder = H264Encoder()
    decoder = av.CodecContext.create("h264", "r")
    decoded = 0
    for i, frame in enumerate(video_frames(8)):
        payloads, _ = encoder.encode(frame, force_keyframe=i == 0)
        assert encoder.codec.bit_rate == encoder.target_bitrate == 500_000
        data = b"".join(h264_depayload(p) for p in payloads)  # Annex B, start codes in
        decoded += len(decoder.decode(av.Packet(data))) if data else 0
    assert [o["preset"] for o in options] == ["veryfast"]  # opened once, by us
    assert decoded >= 7  # every frame but what the decoder still holds


def test_remb_moves_the_bitrate_only_within_the_limits():
    limits = BitrateLimits(start=800_000, minimum=300_000, maximum=2_500_000)
    for encoder in (Vp8Encoder(limits=limits), H264Encoder(limits)):
        assert encoder.target_bitrate == 800_000
        encoder.target_bitrate = 100_000  # a receiver asking for less than the minimum
        assert encoder.target_bitrate == 300_000
        encoder.target_bitrate = 9_000_000  # past aiortc's own 1.5 / 3 Mbps maxima too
        assert encoder.target_bitrate == 2_500_000


def test_the_cap_scales_with_frame_size_and_zero_means_none():
    assert bitrate_cap(640, 480, 3000) == 921_600
    assert bitrate_cap(320, 240, 3000) == 230_400
    assert bitrate_cap(640, 480, 0) is None


def _encoded_bytes(encoder: Vp8Encoder, frames) -> int:
    return sum(len(p) for frame in frames for p in encoder.encode(frame)[0])


def test_a_receiver_cannot_raise_the_bitrate_past_the_cap_for_the_frame_size():
    frames = video_frames(60, size=(320, 240), noise=40)  # two seconds with residual to code
    capped, free = Vp8Encoder(kbps_per_megapixel=3000), Vp8Encoder()
    for encoder in (capped, free):
        encoder.target_bitrate = 1_500_000  # a REMB from a receiver on loopback
    capped_bytes, free_bytes = _encoded_bytes(capped, frames), _encoded_bytes(free, frames)
    assert capped.codec.bit_rate == capped.target_bitrate == 230_400
    assert free.codec.bit_rate == 1_500_000
    # Constant bitrate: two seconds come out near 2 x the rate either way.
    assert capped_bytes < 0.4 * free_bytes, (capped_bytes, free_bytes)
    capped.target_bitrate = 250_000  # within 10 % of the cap: the codec stays
    capped.encode(frames[0])
    assert capped.codec.bit_rate == 230_400
    # A larger frame has a larger cap; a receiver's lower estimate still lowers the rate.
    large = video_frames(2, size=(640, 480))
    capped.target_bitrate = 1_500_000
    capped.encode(large[0])
    assert capped.codec.bit_rate == 921_600
    capped.target_bitrate = 400_000
    capped.encode(large[1])
    assert capped.codec.bit_rate == 400_000


def test_install_sets_the_cap_of_encoders_built_after_it():
    vp8 = RTCRtpCodecParameters(mimeType="video/VP8", clockRate=90000, payloadType=96)
    try:
        install(kbps_per_megapixel=1000)
        encoder = rtcrtpsender.get_encoder(vp8)
        encoder.target_bitrate = 1_500_000
        encoder.encode(video_frames(1, size=(640, 480))[0])
        assert encoder.codec.bit_rate == 307_200
    finally:
        install()
