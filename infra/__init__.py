"""inferry's Pulumi program and the pure logic it is built from."""
