"""mmrag: scene text read in images by PP-OCR (rapidocr-onnxruntime), cached and indexed."""
