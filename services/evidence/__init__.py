"""Evidence of a match: its passages cut for showing, with the differences inside each (:mod:`.passages`), and
the signed bundle a recipient can check (:mod:`.bundle`), attached to takedown notices and downloaded from
the admin and ``fptrack evidence``."""
