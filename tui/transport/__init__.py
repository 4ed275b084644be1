"""How bytes reach infertop: server access (headers, TLS, credentials) and, below the
engines, the HTTP plumbing they share. No Textual, no engine imports here."""
