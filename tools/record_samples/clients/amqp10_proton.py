"""AMQP 1.0 client for the amqp10_mixed scenario (python-qpid-proton, run by protocols.py with the
recorder venv's python).  One connection: SASL PLAIN, open with hostname vhost:<vhost>, one session;
a sender link to /amq/queue/<queue> sends 3 messages and waits for each disposition (accepted); then
the sender link is closed, a receiver link on the same address takes the 3 messages back (proton
accepts each), the receiver link and the connection are closed.  Prints one JSON line with what the
client did and saw; PN_TRACE_FRM=1 (set by the recorder) makes proton log every frame and protocol
header it sends and receives on stderr, which the recorder reads."""
import json
import os
import sys

from proton import Message
from proton.handlers import MessagingHandler
from proton.reactor import Container

HOST, USER, PASSWORD, VHOST = (os.environ[k] for k in ("AMQPCAP_HOST", "AMQPCAP_USER", "AMQPCAP_PASSWORD",
                                                        "AMQPCAP_VHOST"))
ADDRESS = sys.argv[1]
N = 3


class Client(MessagingHandler):
    def __init__(self):
        super().__init__(prefetch=N, auto_accept=True, auto_settle=True)
        self.sent, self.outcomes, self.received, self.port = [], [], [], None
        self.conn = self.sender = None

    def on_start(self, event):
        self.conn = event.container.connect(
            url=f"amqp://{HOST}:5672", user=USER, password=PASSWORD, sasl_enabled=True,
            allowed_mechs="PLAIN", allow_insecure_mechs=True, virtual_host=f"vhost:{VHOST}",
            reconnect=False)
        self.sender = event.container.create_sender(self.conn, ADDRESS, name="amqpcap-sender")

    def on_connection_opened(self, event):
        sel = getattr(event.transport, "_selectable", None)
        sock = getattr(sel, "_delegate", None)
        if sock is not None:
            self.port = sock.getsockname()[1]

    def on_sendable(self, event):
        while event.sender.credit and len(self.sent) < N:
            i = len(self.sent) + 1
            msg = Message(id=f"amqp10-{i}", subject="amqpcap", content_type="text/plain",
                          properties={"n": i}, body=f"AMQP 1.0 message {i}")
            event.sender.send(msg)
            self.sent.append(msg.id)

    def _settled(self, event, outcome):
        self.outcomes.append(outcome)
        if len(self.outcomes) == N:
            self.sender.close()
            event.container.create_receiver(self.conn, ADDRESS, name="amqpcap-receiver")

    def on_accepted(self, event):
        self._settled(event, "accepted")

    def on_rejected(self, event):
        self._settled(event, "rejected")

    def on_released(self, event):
        self._settled(event, "released")

    def on_message(self, event):
        m = event.message
        self.received.append({"id": m.id, "body": m.body, "properties": dict(m.properties or {}),
                              "content_type": m.content_type})
        if len(self.received) == N:
            event.receiver.close()
            event.connection.close()


c = Client()
Container(c).run()
print(json.dumps({"port": c.port, "sent": c.sent, "outcomes": c.outcomes, "received": c.received}))
