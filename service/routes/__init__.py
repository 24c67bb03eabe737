"""HTTP routes, one module per concern; `service.app.create_app` composes them."""
