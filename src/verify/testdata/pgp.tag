object c279cd2414afe998dc5203faccca74c97db738ee
type commit
tag v3
tagger Ada Author <ada@example.com> 1796283314 +0000

release v3 signed by ada
-----BEGIN PGP SIGNATURE-----

iHUEABYIAB0WIQQ3IYPfq9jIYDl770bzhJO7w/bvLQUCaxEbsgAKCRDzhJO7w/bv
LY1pAP0aQh0cZcdbo63l24VfqKCT4+QjQUmTXYnBOY0Rr2ywwgD9Fjv7Qan9sTMM
Es/9c9VfKQoQ9oL6buv50BmpfSQlhQU=
=1LJv
-----END PGP SIGNATURE-----
