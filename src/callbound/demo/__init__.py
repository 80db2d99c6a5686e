"""The refund demo: a scripted model, three tools and a fake payments service."""
