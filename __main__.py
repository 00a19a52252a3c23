"""Pulumi entry point: `pulumi up` runs this file (the project folder is the program folder); only wiring.

It sits at the project root, not in infra/: Pulumi starts the dynamic-provider plugin in the program folder
and resolves Pulumi.yaml's `virtualenv: .venv` against it, and the program folder comes first on sys.path,
where infra/'s own module names would shadow the standard library's (infra/stack/secrets.py and `secrets`).
"""
from infra.program import main

main()
