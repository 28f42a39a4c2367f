"""A broker's view of the cluster metadata: the image, its loading, the cache handlers read, and the broker's standing
with the controller."""
