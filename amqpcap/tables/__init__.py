"""The lake's tables, declared once (`registry`), and the raw tables' rows made from the decoder's
records (`rows`)."""
