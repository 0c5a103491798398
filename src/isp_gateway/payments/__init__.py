"""Money conversations (MONEY.md): payment promises and payment reports."""
