"""napari plugin of msclassify: the "Pixel classifier" and "Tabular (cost vs accuracy)" widgets,
a lazy reader for videos and TIFF stacks, and the synthetic fly sample data.

napari finds the contributions through ``napari.yaml`` (npe2); importing this
package imports neither Qt nor napari.
"""

__all__ = []
