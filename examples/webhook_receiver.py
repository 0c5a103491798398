"""A webhook receiver for isp-gateway's outage notices: verify, then act (docs/outages.md).

    WEBHOOK_SECRET=whsec_... python examples/webhook_receiver.py   # listens on 127.0.0.1:9000
"""

import os
from http.server import BaseHTTPRequestHandler, HTTPServer

from standardwebhooks import Webhook, WebhookVerificationError

hook = Webhook(os.environ["WEBHOOK_SECRET"])  # the whsec_... `webhooks add` printed


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        try:
            event = hook.verify(body, dict(self.headers))  # signature and timestamp
        except WebhookVerificationError:
            self.send_response(401)
        else:
            # At least once: the same notice may come twice, under the same webhook-id.
            print(self.headers["webhook-id"], event["type"], event["data"]["message"], flush=True)
            self.send_response(204)
        self.end_headers()


HTTPServer(("127.0.0.1", int(os.environ.get("PORT", "9000"))), Receiver).serve_forever()
