"""The ``sundial`` command (click): serve, migrations, administration, messages, work."""
