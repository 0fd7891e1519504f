"""Accounts of the admin: users and their passwords, roles and login limit (:mod:`.users`), and the API
tokens that act as them (:mod:`.tokens`); what a notice's senders and host contacts may hold
(:mod:`.contact_fields`)."""
