"""``email_notification`` v1 and v2 against a real SMTP server on loopback (aiosmtpd): over
implicit TLS and STARTTLS with a login, the certificate checked against the test's own CA;
the server's relay for v2's managed provider; and what is refused, and how."""

from __future__ import annotations

import asyncio
import logging

import numpy as np
import pytest

from streaming.config import Settings, SmtpSettings
from streaming.egress import EgressPolicy, EgressRefused
from streaming.errors import WorkflowCompilationError
from streaming.inference.registry import ModelRegistry
from streaming.protocol.messages import WorkflowConfiguration
from streaming.workflows import compile_workflow, parse_spec
from streaming.workflows.blocks.base import BuildContext, FrameState
from streaming.workflows.runner import compile_config
from tests.support.smtp import PASSWORD, USER, MailServer


@pytest.fixture(scope="module", params=["implicit", "starttls"])
def mail(request, tmp_path_factory):
    server = MailServer(tmp_path_factory.mktemp("smtp"), request.param)
    yield server
    server.stop()


def settings_for(mail: MailServer, tmp_path, **smtp) -> Settings:
    """Our SMTP client trusting the test server's certificate, in the server's TLS mode."""
    smtp = {"tls": mail.tls, **smtp}
    return Settings(
        models_dir=tmp_path,
        smtp=SmtpSettings(ca_file=mail.ca_file, **smtp),
        allowed_networks="127.0.0.0/8",
    )  # the test's server is on loopback


def relay_settings(mail: MailServer, tmp_path, **smtp) -> Settings:
    """The test server as the server's relay, sending to ``@example.test`` (no floor)."""
    relay = {
        "host": "127.0.0.1",
        "port": mail.port,
        "username": USER,
        "password": PASSWORD,
        "sender": "camera@example.test",
        "allowed_recipients": ["@example.test"],
        "min_interval_s": 0,
    }
    return settings_for(mail, tmp_path, **(relay | smtp))


def email_step(version: str = "v1", **fields) -> dict:
    return {"type": f"roboflow_core/email_notification@{version}", "name": "mail", **fields}


def spec_of(*steps: dict) -> dict:
    return {
        "version": "1.0",
        "inputs": [
            {"type": "InferenceImage", "name": "image"},
            {"type": "WorkflowParameter", "name": "count"},
        ],
        "steps": list(steps),
        "outputs": [{"type": "JsonField", "name": "sent", "selector": "$steps.mail.*"}],
    }


def run_frames(
    spec: dict, settings: Settings, frames: int = 1, caller: str = "anonymous", **parameters
) -> list[dict]:
    """Each frame's outputs; the workflow closed (its queued mail sent) before returning."""
    registry = ModelRegistry(settings)
    context = BuildContext(registry, settings=settings, caller=caller)
    workflow = compile_workflow(parse_spec(spec), context, parameters=parameters)
    image = np.full((48, 64, 3), (0, 0, 255), np.uint8)
    try:
        return [workflow.run(image, parameters, FrameState())["sent"] for _ in range(frames)]
    finally:
        workflow.close()
        registry.close()


def custom(mail: MailServer, version: str = "v1", subject: str = "Intruder", **fields) -> dict:
    """A step logging in to the test's server as its user (``fields`` override)."""
    provider = {"email_provider": "Custom SMTP"} if version == "v2" else {}
    login = {"sender_email": USER, "sender_email_password": PASSWORD,
             "smtp_server": "127.0.0.1", "smtp_port": mail.port}  # fmt: skip
    return email_step(version, **provider, subject=subject, **(login | fields))


def test_v1_sends_text_with_its_parameters_to_every_recipient(mail, tmp_path):
    step = custom(
        mail,
        subject="v1 text",
        receiver_email="guard@example.test",
        cc_receiver_email=["boss@example.test"],
        bcc_receiver_email="audit@example.test",
        message="{{ $parameters.count }} people at the door ({{$parameters.count}}). "
        "{{ $parameters.none }}",
        message_parameters={"count": "$inputs.count"},
        attachments={"report.csv": "a,b\n1,2\n"},
    )  # fmt: skip
    settings = settings_for(mail, tmp_path)
    (sent,) = run_frames(spec_of(step), settings, count=3)
    assert sent == {"error_status": False, "throttling_status": False,
                    "message": "Notification sent in the background"}  # fmt: skip
    (received,) = mail.wait_for("v1 text")
    assert received.sender == USER
    assert sorted(received.recipients) == [
        "audit@example.test", "boss@example.test", "guard@example.test"
    ]  # fmt: skip
    message = received.message
    assert "Bcc" not in message
    assert message["To"] == "guard@example.test" and message["Cc"] == "boss@example.test"
    body = message.get_body(("plain",))
    assert body.get_content().strip() == (
        "3 people at the door (3). {{ $parameters.none }}"  # unknown: left as written
    )
    (attachment,) = list(message.iter_attachments())
    assert attachment.get_filename() == "report.csv"
    assert attachment.get_content() in (b"a,b\n1,2\n", "a,b\n1,2\n")


def test_v2_custom_smtp_sends_html_with_the_image_inline_and_attached(mail, tmp_path):
    step = custom(
        mail, "v2",
        subject="v2 html",
        receiver_email="guard@example.test",
        message="Seen at <b>{{ $parameters.where }}</b>:\n{{ $parameters.frame }}",
        message_parameters={"where": "<door>", "frame": "$inputs.image"},
        attachments={"snapshot": "$inputs.image"},
    )  # fmt: skip
    settings = settings_for(mail, tmp_path)
    run_frames(spec_of(step), settings)
    (received,) = mail.wait_for("v2 html")
    html = received.message.get_body(("html",))
    content = html.get_content()
    assert "Seen at <b>&lt;door&gt;</b>:<br>" in content  # values escaped, the template not
    assert '<img src="cid:image_frame"' in content
    related = received.message.get_body(("related",))  # the HTML and its images
    (inline,) = [p for p in related.iter_parts() if p["Content-ID"] == "<image_frame>"]
    assert inline.get_content_type() == "image/jpeg" and inline.get_content()[:2] == b"\xff\xd8"
    (attachment,) = list(received.message.iter_attachments())
    assert attachment.get_filename() == "snapshot.jpg"


def test_v2_managed_provider_sends_through_the_servers_relay(mail, tmp_path):
    step = email_step("v2", subject="Relay", receiver_email="guard@example.test",
                      message="through the relay")  # fmt: skip
    settings = relay_settings(mail, tmp_path)
    run_frames(spec_of(step), settings)
    (received,) = mail.wait_for("Relay")
    assert received.message["From"] == "camera@example.test"
    assert received.message.get_body(("plain",)).get_content().strip() == "through the relay"


def test_cooldown_throttles_and_bad_recipients_are_an_error_entry(mail, tmp_path):
    settings = settings_for(mail, tmp_path)
    step = custom(mail, subject="cooldown", receiver_email="guard@example.test", message="x",
                  cooldown_seconds=60)  # fmt: skip
    first, second = run_frames(spec_of(step), settings, frames=2)
    assert (first["throttling_status"], second["throttling_status"]) == (False, True)
    assert len(mail.wait_for("cooldown")) == 1
    (bad,) = run_frames(spec_of(custom(mail, receiver_email="nobody", message="x")), settings)
    assert bad["error_status"] and "receiver_email must be an e-mail address" in bad["message"]


def test_a_wrong_password_is_logged_and_nothing_is_sent(mail, tmp_path, caplog):
    settings = settings_for(mail, tmp_path)
    step = custom(mail, subject="wrong password", receiver_email="guard@example.test",
                  message="x", sender_email_password="wrong-pw")  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="sinks.email"):
        run_frames(spec_of(step), settings)  # closing ends the retries' backoff early
    assert "SMTPAuthenticationError" in caplog.text and "wrong-pw" not in caplog.text
    assert not mail.with_subject("wrong password")


def test_a_server_without_starttls_is_never_sent_a_password(tmp_path, caplog):
    plain = MailServer(tmp_path / "plain", "none")
    try:
        settings = settings_for(plain, tmp_path, tls="auto")  # STARTTLS on a port but 465
        step = custom(plain, receiver_email="guard@example.test", message="x")
        with caplog.at_level(logging.WARNING, logger="sinks.email"):
            run_frames(spec_of(step), settings)
        assert "STARTTLS" in caplog.text and not plain.logins and not plain.received
        # Told so, for a relay on this machine, it sends in the clear.
        run_frames(spec_of(step), settings_for(plain, tmp_path, tls="none"))
        plain.wait_for("Intruder")
    finally:
        plain.stop()


def test_what_is_refused_when_compiled(tmp_path):
    settings = Settings(models_dir=tmp_path)
    cases = [
        (email_step("v2", subject="s", message="m", receiver_email="a@b.test"),
         "VISIONSTREAM_SMTP_HOST"),
        (email_step("v2", email_provider="Custom SMTP", subject="s", message="m",
                    receiver_email="a@b.test"), "Custom SMTP needs smtp_server"),
        (email_step(subject="s", message="m", receiver_email="a@b.test", sender_email="a@b.test",
                    sender_email_password="p", smtp_server="evil.test/x"), "smtp_server must be"),
        (email_step(subject="s", message="m", receiver_email="a@b.test", sender_email="a@b.test",
                    sender_email_password="p", smtp_server="mail.test", smtp_port=0),
         "smtp_port must be"),
        (email_step(subject="s", message="m", receiver_email="a@b.test", sender_email="a@b.test",
                    sender_email_password="p", smtp_server="mail.test",
                    message_parameters_operations={"x": []}), "names \\['x'\\]"),
    ]  # fmt: skip
    for step, words in cases:
        with pytest.raises(WorkflowCompilationError, match=words):
            run_frames(spec_of(step), settings)


def test_the_smtp_server_passes_the_egress_policy_before_compiling(tmp_path):
    step = email_step(subject="s", message="m", receiver_email="a@b.test",
                      sender_email="a@b.test", sender_email_password="p",
                      smtp_server="$inputs.relay", smtp_port=2525)  # fmt: skip
    spec = spec_of(step)
    spec["inputs"].append({"type": "WorkflowParameter", "name": "relay"})
    config = WorkflowConfiguration(workflows_parameters={"relay": "127.0.0.1"})
    policy = EgressPolicy(["192.0.2.0/24"])  # anywhere but here: loopback is not allowed
    registry = ModelRegistry(Settings(models_dir=tmp_path))
    with pytest.raises(EgressRefused, match=r"step 'mail' smtp_server smtp://127\.0\.0\.1:2525"):
        asyncio.run(compile_config(config, spec, BuildContext(registry), egress=policy))


def relay_step(subject: str, **fields) -> dict:
    return email_step(
        "v2",
        subject=subject,
        message="m",
        receiver_email="guard@example.test",
        cooldown_seconds=0,
        **fields,
    )


def test_the_relay_sends_only_to_the_operators_recipients(mail, tmp_path):
    settings = relay_settings(mail, tmp_path)
    outside = relay_step("outside", cc_receiver_email=["me@attacker.test"])
    (refused,) = run_frames(spec_of(outside), settings)
    assert refused["error_status"] and "does not send to ['me@attacker.test']" in refused["message"]
    many = relay_step("many", bcc_receiver_email=[f"u{i}@example.test" for i in range(5000)])
    (refused,) = run_frames(spec_of(many), settings)
    assert "5001 recipients are over the server's 10" in refused["message"]
    with pytest.raises(WorkflowCompilationError, match="VISIONSTREAM_SMTP_ALLOWED_RECIPIENTS"):
        run_frames(
            spec_of(relay_step("none")), relay_settings(mail, tmp_path, allowed_recipients=[])
        )
    (sent,) = run_frames(spec_of(relay_step("inside")), settings)
    assert not sent["error_status"]
    mail.wait_for("inside")
    assert not mail.with_subject("outside") and not mail.with_subject("many")


def test_the_relay_keeps_its_interval_per_step_and_per_caller(mail, tmp_path):
    settings = relay_settings(mail, tmp_path, min_interval_s=3600)
    caller = f"floor-{mail.tls}"  # this test's own caller: the floor is process-wide
    frames = run_frames(spec_of(relay_step("floor")), settings, frames=3, caller=caller)
    assert [f["throttling_status"] for f in frames] == [False, True, True]  # cooldown_seconds 0
    # A second workflow of the same caller is held back by the first one's message.
    (again,) = run_frames(spec_of(relay_step("floor again")), settings, caller=caller)
    assert again["throttling_status"] and "interval" in again["message"]
    mail.wait_for("floor")
    assert not mail.with_subject("floor again")


def test_message_and_attachment_sizes_are_bounded(mail, tmp_path):
    big = "x" * (2 << 20)
    settings = relay_settings(mail, tmp_path, max_attachment_bytes=1 << 20)
    step = custom(
        mail,
        subject="big",
        receiver_email="guard@example.test",
        message="m",
        attachments={"big.txt": big},
    )
    (refused,) = run_frames(spec_of(step), settings)
    assert "VISIONSTREAM_SMTP_MAX_ATTACHMENT_BYTES" in refused["message"]
    settings = relay_settings(mail, tmp_path, max_message_bytes=1 << 20)
    step = custom(mail, subject="long", receiver_email="guard@example.test", message=big)
    (refused,) = run_frames(spec_of(step), settings)
    assert "VISIONSTREAM_SMTP_MAX_MESSAGE_BYTES" in refused["message"]
    assert not mail.with_subject("big") and not mail.with_subject("long")
