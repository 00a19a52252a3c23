"""Real servers the test suite starts: S3 (rclone serve s3), reused by every integration helper."""
