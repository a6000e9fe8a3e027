"""The control plane between the orchestrator and its agents: one SQS FIFO queue, a few S3 objects.

- **Reports** (agent -> orchestrator): the SQS FIFO queue ``spottune-<experiment>.fifo``, one message per
  worker report (:mod:`spottune.backends.local._messages`, the worker's own JSON line) in an
  :class:`Envelope` ``{"launch", "trial", "seq", "kind", "body"}``. Message group = trial (order per trial),
  deduplication id = ``<launch>-<seq>``: a resent message is dropped by SQS within 5 minutes, and by
  :class:`Inbox` (which remembers the last sequence number of every launch) after that. The queue outlives
  the orchestrator, and a message is deleted only once the orchestrator has handled (journaled) it
  (:meth:`Inbox.ack`, decision AWS14): a crash loses no report, one received but not yet handled comes
  back after its visibility timeout.
- **Segments** (orchestrator -> agent, once): ``s3://<bucket>/<prefix>/<experiment>/segments/<launch>.json``,
  written before the launch; the user data points at it.
- **Commands** (orchestrator -> agent): ``.../commands/<launch>.json`` = ``{"seq": n, "line": <command>}``;
  the agent polls it and hands every new command to its worker.
- **Lease** (the dead-man switch): ``.../lease.json`` = ``{"renewed_at": <wall s>, "valid_s": <s>}``; the
  orchestrator renews it; an agent that finds it older than ``valid_s`` stops its worker and powers the
  instance off.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Envelope", "Inbox", "Outbox", "Control", "queue_name"]


def queue_name(experiment: str) -> str:
    """The SQS FIFO queue of an experiment (80 characters at most, ``.fifo`` suffix).

    Parameters
    ----------
    experiment : str
        The experiment's name; characters other than letters, digits, ``-`` and ``_`` become ``-``.

    Returns
    -------
    str
    """
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in experiment)
    return f"spottune-{safe}"[:75] + ".fifo"


@dataclass(frozen=True, slots=True)
class Envelope:
    """One message on the queue: ``kind`` is ``report`` (``body``: the worker's JSON line), ``exit`` (``body``:
    the worker's exit code) or ``rebalance`` (``body``: the IMDS rebalance recommendation).

    Parameters
    ----------
    launch : str
        The launch id.
    trial : str
        The trial id (the message group).
    seq : int
        Sequence number within the launch, from 1.
    kind : {"report", "exit", "rebalance"}
        See above.
    body : object
        JSON-ready.
    """

    launch: str
    trial: str
    seq: int
    kind: str
    body: Any

    def dumps(self) -> str:
        """The message body.

        Returns
        -------
        str
            JSON.
        """
        return json.dumps(asdict(self))

    @classmethod
    def loads(cls, text: str) -> "Envelope":
        """Parse a message body.

        Parameters
        ----------
        text : str
            A message body.

        Returns
        -------
        Envelope

        Raises
        ------
        ValueError
            If ``text`` is not an envelope.
        """
        try:
            d = json.loads(text)
            return cls(str(d["launch"]), str(d["trial"]), int(d["seq"]), str(d["kind"]), d.get("body"))
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a spottune envelope: {text[:200]!r}") from exc


class Outbox:
    """The agent's side of the queue: numbered, deduplicated messages of one launch.

    Parameters
    ----------
    sqs : botocore.client.BaseClient
        An SQS client.
    queue_url : str
        The experiment's queue.
    launch, trial : str
        The segment's launch and trial ids.
    """

    def __init__(self, sqs: Any, queue_url: str, launch: str, trial: str):
        self.sqs, self.queue_url, self.launch, self.trial = sqs, queue_url, launch, trial
        self.seq = 0
        self._lock = threading.Lock()

    def send(self, kind: str, body: Any) -> None:
        """Send one envelope (thread-safe: numbers are taken and sent in order).

        Parameters
        ----------
        kind : {"report", "exit", "rebalance"}
            The envelope's kind.
        body : object
            JSON-ready.
        """
        with self._lock:
            self.seq += 1
            self._send(Envelope(self.launch, self.trial, self.seq, kind, body))

    def _send(self, env: Envelope) -> None:
        self.sqs.send_message(QueueUrl=self.queue_url, MessageBody=env.dumps(), MessageGroupId=self.trial,
                              MessageDeduplicationId=f"{env.launch}-{env.seq}")


class Inbox:
    """The orchestrator's side: receive, drop duplicates (per launch, by sequence number), delete once handled.

    A new envelope's message stays in the queue (invisible for the receive's visibility timeout) until
    :meth:`ack`: the orchestrator acknowledges a batch once it has handled and journaled every envelope of
    it, so a crash in between loses nothing (decision AWS14). Duplicates and foreign messages are deleted
    at once.

    Parameters
    ----------
    sqs : botocore.client.BaseClient
        An SQS client.
    queue_url : str
        The experiment's queue.
    """

    def __init__(self, sqs: Any, queue_url: str):
        self.sqs, self.queue_url = sqs, queue_url
        self._last: dict[str, int] = {}
        self._unacked: list[str] = []
        self.duplicates = 0

    def receive(self, wait_s: int = 0, visibility_s: int | None = None) -> list[Envelope]:
        """Messages waiting now (up to 10, oldest first per trial), each once.

        Parameters
        ----------
        wait_s : int, default 0
            SQS long-poll seconds (0 to 20).
        visibility_s : int, optional
            Seconds a received message stays hidden from other receives (SQS ``VisibilityTimeout``); None:
            the queue's (30 s).

        Returns
        -------
        list of Envelope
            New envelopes, left in the queue until :meth:`ack`; duplicates and foreign messages are dropped
            and deleted.
        """
        extra = {} if visibility_s is None else {"VisibilityTimeout": int(visibility_s)}
        out = self.sqs.receive_message(QueueUrl=self.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=wait_s,
                                       AttributeNames=["All"], **extra)
        msgs = out.get("Messages", [])
        envs, drop = [], []
        for m in msgs:
            try:
                env = Envelope.loads(m["Body"])
            except ValueError:
                drop.append(m["ReceiptHandle"])
                continue
            if env.seq <= self._last.get(env.launch, 0):
                self.duplicates += 1
                drop.append(m["ReceiptHandle"])
                continue
            self._last[env.launch] = env.seq
            envs.append(env)
            self._unacked.append(m["ReceiptHandle"])
        self._delete(drop)
        return envs

    def ack(self) -> None:
        """Delete the messages of every envelope :meth:`receive` returned so far (they are handled)."""
        handles, self._unacked = self._unacked, []
        self._delete(handles)

    def _delete(self, handles: list[str]) -> None:
        for i in range(0, len(handles), 10):  # an expired receipt handle fails alone: its duplicate is dropped later
            self.sqs.delete_message_batch(QueueUrl=self.queue_url, Entries=[
                {"Id": str(j), "ReceiptHandle": h} for j, h in enumerate(handles[i:i + 10])])


class Control:
    """The S3 control objects of one experiment (segments, commands, lease) under ``s3://bucket/root/``.

    Parameters
    ----------
    s3 : botocore.client.BaseClient
        An S3 client.
    bucket : str
        The experiment's bucket.
    root : str
        The experiment's prefix in it.
    """

    def __init__(self, s3: Any, bucket: str, root: str):
        self.s3, self.bucket, self.root = s3, bucket, root.strip("/")

    # -- keys and urls -------------------------------------------------------------------------------
    def key(self, *parts: str) -> str:
        """The S3 key of a control object below the experiment's root.

        Parameters
        ----------
        *parts : str
            Path parts below the root.

        Returns
        -------
        str
        """
        return "/".join([self.root, *parts])

    def url(self, key: str) -> str:
        """The ``s3://`` URL of a key of this bucket.

        Parameters
        ----------
        key : str
            An S3 key.

        Returns
        -------
        str
        """
        return f"s3://{self.bucket}/{key}"

    @staticmethod
    def split(url: str) -> tuple[str, str]:
        """(bucket, key) of ``s3://bucket/key``; ValueError otherwise.

        Parameters
        ----------
        url : str
            An ``s3://bucket/key`` URL.

        Returns
        -------
        bucket : str
        key : str

        Raises
        ------
        ValueError
            If ``url`` is not one.
        """
        if not url.startswith("s3://") or "/" not in url[5:]:
            raise ValueError(f"{url!r} is not an s3://bucket/key URL")
        bucket, key = url[5:].split("/", 1)
        return bucket, key

    def put_json(self, key: str, doc: Any) -> None:
        """Write ``doc`` as a JSON object (overwritten if it exists).

        Parameters
        ----------
        key : str
            The S3 key.
        doc : object
            JSON-ready.
        """
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps(doc).encode(),
                           ContentType="application/json")

    def get_json(self, key: str) -> Any | None:
        """The object's JSON, or None if it does not exist.

        Parameters
        ----------
        key : str
            The S3 key.

        Returns
        -------
        object or None
        """
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=key)["Body"].read()
        except self.s3.exceptions.NoSuchKey:
            return None
        return json.loads(body)

    # -- segments, commands, lease ---------------------------------------------------------------------
    def put_segment(self, launch: str, doc: dict[str, Any]) -> str:
        """Write a segment description; returns its URL (for the user data).

        Parameters
        ----------
        launch : str
            The launch id (one segment).
        doc : dict
            The segment: the worker's arguments and the trial's settings.

        Returns
        -------
        str
            The segment's ``s3://`` URL.
        """
        key = self.key("segments", f"{launch}.json")
        self.put_json(key, doc)
        return self.url(key)

    def put_command(self, launch: str, seq: int, line: str) -> None:
        """Post the launch's latest command for its agent to poll.

        Parameters
        ----------
        launch : str
            The launch id (one segment).
        seq : int
            The command's number (the agent runs each number once).
        line : str
            The command's JSON line (:mod:`spottune.backends.local._messages`).
        """
        self.put_json(self.key("commands", f"{launch}.json"), {"seq": int(seq), "line": line})

    def get_command(self, launch: str) -> tuple[int, str] | None:
        """The launch's latest command, as its agent polls it.

        Parameters
        ----------
        launch : str
            The launch id (one segment).

        Returns
        -------
        tuple of (int, str) or None
            (number, JSON line), or None before the first command.
        """
        doc = self.get_json(self.key("commands", f"{launch}.json"))
        return None if doc is None else (int(doc["seq"]), str(doc["line"]))

    def renew_lease(self, valid_s: float, now_wall: float | None = None) -> None:
        """The orchestrator is alive: agents may go on for ``valid_s`` wall seconds from now.

        Parameters
        ----------
        valid_s : float
            Seconds the lease is valid.
        now_wall : float, optional
            Now, wall seconds since the epoch; default: the clock.
        """
        self.put_json(self.key("lease.json"), {"renewed_at": time.time() if now_wall is None else now_wall,
                                               "valid_s": float(valid_s)})

    def lease_stale(self, now_wall: float | None = None) -> bool:
        """True if the lease is missing or was last renewed more than ``valid_s`` ago (wall clock).

        Parameters
        ----------
        now_wall : float, optional
            Now, wall seconds since the epoch; default: the clock.

        Returns
        -------
        bool
        """
        doc = self.get_json(self.key("lease.json"))
        if doc is None:
            return True
        now = time.time() if now_wall is None else now_wall
        return now > float(doc["renewed_at"]) + float(doc["valid_s"])
