"""Outgoing webhooks: signed (Standard Webhooks), queued in the store, retried, sent by one
worker at a time (OUTAGES.md 1-3). The features publish through `service.Notices`."""
