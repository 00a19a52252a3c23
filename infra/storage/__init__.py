"""S3-compatible weight store: settings, bucket resource, manifest, verified resumable sync, presigned URLs."""
