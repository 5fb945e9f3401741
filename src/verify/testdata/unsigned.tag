object 57eed11c0f132d122322dae63922ad03719d88b3
type commit
tag v2
tagger Ada Author <ada@example.com> 1767323045 +0000

release v2, not signed
